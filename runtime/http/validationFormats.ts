import { fullFormats } from 'ajv-formats/dist/formats';
import { isStorableDateTime } from '../time';

/**
 * The string formats the generated validators check (generated/validators/*.js require this
 * module; scripts/contract/validators.ts compiles with the same table). ajv-formats' full set,
 * with `date-time` narrowed to what the API can store: RFC 3339 proper (offset `Z` or `±hh:mm`),
 * a real calendar date, years 0000–9999 once in UTC.
 */
export const validationFormats = {
  ...fullFormats,
  'date-time': { type: 'string' as const, validate: isStorableDateTime },
};
