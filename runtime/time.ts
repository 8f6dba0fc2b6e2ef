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

// ---------------------------------------------------------------------------------------------
// Wall-clock time in an IANA time zone. A local `YYYY-MM-DDTHH:mm:ss` is handled as "floating"
// milliseconds: the epoch milliseconds it would have in UTC (`2026-03-30T09:00:00` →
// Date.UTC(2026, 2, 30, 9)); the zone's rules (Intl) turn it into a real instant and back.

const DAY = 86_400_000;

/** Floating milliseconds → `YYYY-MM-DDTHH:mm:ss`. */
export function formatLocal(floating: number): string {
  return new Date(floating).toISOString().slice(0, 19);
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The wall clock of `timeZone` at the instant `utc`, as floating milliseconds. */
export function wallClockAt(utc: number, timeZone: string): number {
  const whole = Math.floor(utc / 1000) * 1000;
  const parts: Record<string, number> = {};
  for (const p of formatterFor(timeZone).formatToParts(new Date(whole))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour % 24, parts.minute, parts.second) + (utc - whole);
}

/**
 * The instant at which `timeZone`'s clocks show the floating time `local`. Like Temporal's
 * `disambiguation: 'compatible'`: a time repeated when clocks go back is its first (earlier)
 * instant; a time skipped when clocks go forward moves forward by the length of the gap.
 */
export function localToUtc(local: number, timeZone: string): number {
  const before = wallClockAt(local - DAY, timeZone) - (local - DAY);
  const after = wallClockAt(local + DAY, timeZone) - (local + DAY);
  const candidates = [...new Set([before, after])]
    .map((offset) => local - offset)
    .filter((utc) => wallClockAt(utc, timeZone) === local)
    .sort((a, b) => a - b);
  return candidates.length ? candidates[0] : local - before;
}

/** The instant (UTC with milliseconds) at which `timeZone`'s clocks show the stored local `YYYY-MM-DDTHH:mm:ss`. */
export function localInstant(local: string, timeZone: string): string {
  return new Date(localToUtc(Date.parse(`${local}Z`), timeZone)).toISOString();
}
