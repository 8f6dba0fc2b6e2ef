/** Timestamps in responses: UTC with milliseconds (docs/architecture.md, "Representation"). Stored in the same form, so text order is time order. */
export function nowIso(): string {
  return new Date().toISOString();
}

/**
 * RFC 3339 `date-time` (section 5.6): a full date, `T`, a time with optional fraction, and `Z` or a
 * `±hh:mm` offset. Stricter than ajv-formats, which also takes `+01` and `+0100` — forms that
 * `Date` cannot parse.
 */
const RFC3339_DATE_TIME = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;

/** Milliseconds since the epoch, or NaN. A leap second (:60), which Date cannot represent, counts as the last millisecond of its minute. */
function parseRfc3339(value: string): number {
  if (!RFC3339_DATE_TIME.test(value)) return NaN;
  return Date.parse(value.replace(/:60(\.\d+)?(?=([Zz]|[+-]\d\d:\d\d)$)/, ':59.999'));
}

/** The instants whose UTC form has a four-digit year, as stored timestamps must. */
const LAST_STORABLE = Date.parse('9999-12-31T23:59:59.999Z');
const FIRST_STORABLE = Date.parse('0000-01-01T00:00:00.000Z');

/**
 * The contract's `date-time` format (runtime/http/validationFormats.ts): RFC 3339, a real calendar
 * date, and in UTC still within the years 0000–9999, so that every accepted value normalizes to
 * the stored `YYYY-MM-DDTHH:mm:ss.sssZ` form.
 */
export function isStorableDateTime(value: string): boolean {
  const ms = parseRfc3339(value);
  if (Number.isNaN(ms) || ms < FIRST_STORABLE || ms > LAST_STORABLE) return false;
  // Date.parse rolls 2026-02-30 over to March: the date part must survive the round trip (offset aside)
  const [, y, m, d] = /^(\d{4})-(\d{2})-(\d{2})/.exec(value)!;
  return new Date(Date.UTC(Number(y), Number(m) - 1, Number(d))).getUTCDate() === Number(d);
}

/** Milliseconds since the epoch of a date-time the contract has validated. */
export function timestampMs(value: string): number {
  return parseRfc3339(value);
}

/** Normalizes an RFC 3339 date-time (already validated by the contract) to UTC with milliseconds. */
export function normalizeTimestamp(value: string): string {
  return new Date(parseRfc3339(value)).toISOString();
}

export function normalizeOptionalTimestamp(value: string | null | undefined): string | null | undefined {
  return value === undefined || value === null ? value : normalizeTimestamp(value);
}
