import { invalidField } from '../errors';

/**
 * The canonical IANA name of time zone `name` as the runtime's ICU data gives it: letter case
 * corrected (`EUROPE/LONDON` is `Europe/London`, `utc` is `UTC`) and a link resolved where ICU
 * resolves it (`US/Eastern` is `America/New_York`). What is stored and shown, so that a client
 * comparing names, or a case-sensitive zone database, gets a name that exists. Throws 400
 * VALIDATION_ERROR naming `pointer` when `name` is not an IANA time zone.
 */
export function canonicalTimeZone(name: string, pointer: string): string {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    throw invalidField(pointer, `must be an IANA time zone name such as Europe/London (got ${JSON.stringify(name)})`);
  }
}
