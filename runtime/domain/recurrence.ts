import { RRule, Frequency, Weekday } from 'rrule';
import { invalidField } from '../errors';
import { formatLocal, isStorableDateTime, localToUtc, timestampMs, wallClockAt } from '../time';

// the wall-clock conversions live with the other time helpers so that storage can present a
// schedule's instant too; re-exported here, where the recurrence code and its tests look for them
export { formatLocal, localToUtc, wallClockAt };

/**
 * Schedules and their occurrences in the schedule's own time zone.
 *
 * rrule's `tzid` support converts through the host's local zone and gets DST edges wrong, so
 * recurrence is evaluated in "floating" time instead: a local wall-clock time is represented
 * as the epoch milliseconds it would have in UTC (`2026-03-30T09:00:00` → Date.UTC(2026, 2, 30, 9)),
 * rrule runs on those in UTC, and each result is converted to a real instant with the zone's
 * rules (Intl). A weekly Monday 09:00 therefore stays 09:00 local while its UTC instant moves
 * with daylight-saving time.
 */

const MINUTE = 60_000;
const DAY = 86_400_000;

/** What of a schedule decides when its occurrences are. */
export interface ScheduleTiming {
  timezone: string;
  /** Local wall-clock `YYYY-MM-DDTHH:mm:ss`. */
  startsAt: string;
  durationMinutes: number;
  /** Normalized RRULE, or null for a single occurrence. */
  recurrence: string | null;
}

export interface OccurrenceTime {
  startAt: number;
  endAt: number;
  /** Wall-clock start in the schedule's zone, `YYYY-MM-DDTHH:mm:ss`. */
  localStartAt: string;
}

// ---------------------------------------------------------------------------------------------
// Local wall-clock time ↔ UTC

const LOCAL_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})$/;
// Bounds keep every year four digits, and the search for a new rule's first occurrence (assertOccurs) short.
const MIN_YEAR = 1970;
const MAX_YEAR = 2200;

/** Parses a local `YYYY-MM-DDTHH:mm:ss` into floating milliseconds; 400 naming `pointer` when it is no real date and time. */
export function parseLocalDateTime(text: string, pointer: string): number {
  const m = LOCAL_DATE_TIME.exec(text);
  const ms = m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) : NaN;
  if (!m || Number.isNaN(ms) || formatLocal(ms) !== text) {
    throw invalidField(pointer, `must be a local date and time YYYY-MM-DDTHH:mm:ss without offset (e.g. 2026-03-23T09:00:00) or an RFC 3339 date-time with an offset or Z (got ${JSON.stringify(text)})`);
  }
  const year = +m[1];
  if (year < MIN_YEAR || year > MAX_YEAR) throw invalidField(pointer, `must be between the years ${MIN_YEAR} and ${MAX_YEAR}`);
  return ms;
}

/**
 * A schedule's `startsAt` as sent: a local wall-clock time (kept as is) or an RFC 3339 date-time
 * with an offset or `Z` (the contract's pattern has checked its shape), which becomes the wall-clock time
 * `timeZone` shows at that instant. Answers the local `YYYY-MM-DDTHH:mm:ss` that is stored, so
 * occurrences keep following the local time of day across daylight-saving changes whichever form
 * was sent. A fraction of a second is dropped: schedules are kept to the second.
 */
export function resolveStartsAt(text: string, timeZone: string, pointer: string): string {
  if (!OFFSET.test(text)) return formatLocal(parseLocalDateTime(text, pointer));
  if (!isStorableDateTime(text)) throw invalidField(pointer, `must be a real date and time (got ${JSON.stringify(text)})`);
  const local = wallClockAt(Math.floor(timestampMs(text) / 1000) * 1000, timeZone);
  const year = new Date(local).getUTCFullYear();
  if (year < MIN_YEAR || year > MAX_YEAR) throw invalidField(pointer, `must be between the years ${MIN_YEAR} and ${MAX_YEAR}`);
  return formatLocal(local);
}

const OFFSET = /([Zz]|[+-]\d{2}:\d{2})$/;

// ---------------------------------------------------------------------------------------------
// RRULE subset

const WEEKDAYS: Record<string, Weekday> = { MO: RRule.MO, TU: RRule.TU, WE: RRule.WE, TH: RRule.TH, FR: RRule.FR, SA: RRule.SA, SU: RRule.SU };
const FREQUENCIES: Record<string, Frequency> = { DAILY: RRule.DAILY, WEEKLY: RRule.WEEKLY, MONTHLY: RRule.MONTHLY };
const SUPPORTED_PARTS = ['FREQ', 'INTERVAL', 'BYDAY', 'COUNT', 'UNTIL'];
const MAX_INTERVAL = 1000;
const MAX_COUNT = 10000;

export interface RecurrenceRule {
  /** Upper case, without `RRULE:`; the form stored and returned. */
  normalized: string;
  freq: 'DAILY' | 'WEEKLY' | 'MONTHLY';
  interval: number;
  byDay: { weekday: string; nth: number | null }[] | null;
  count: number | null;
  /** `UNTIL=…Z`: the last instant (inclusive) an occurrence may start at. */
  untilUtc: number | null;
  /** `UNTIL=yyyymmdd`: the last local date (inclusive), as floating milliseconds of 23:59:59 that day. */
  untilLocal: number | null;
}

/** Parses and checks the supported RRULE subset; 400 naming `pointer` for anything else. */
export function parseRecurrence(text: string, pointer: string): RecurrenceRule {
  const fail = (message: string) => invalidField(pointer, message);
  const normalized = text.trim().toUpperCase().replace(/^RRULE:/, '');
  const parts = new Map<string, string>();
  for (const part of normalized.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw fail(`must be RRULE parts NAME=VALUE separated by ";", e.g. FREQ=WEEKLY;BYDAY=MO (got ${JSON.stringify(part)})`);
    const name = part.slice(0, eq);
    if (!SUPPORTED_PARTS.includes(name)) throw fail(`${name} is not supported: use only ${SUPPORTED_PARTS.join(', ')}`);
    if (parts.has(name)) throw fail(`${name} is given twice`);
    parts.set(name, part.slice(eq + 1));
  }

  const freq = parts.get('FREQ');
  if (freq === undefined) throw fail('FREQ is required');
  if (!(freq in FREQUENCIES)) throw fail(`FREQ must be DAILY, WEEKLY or MONTHLY (got ${freq})`);

  const integer = (name: string, max: number): number | null => {
    const value = parts.get(name);
    if (value === undefined) return null;
    if (!/^\d{1,6}$/.test(value) || +value < 1 || +value > max) throw fail(`${name} must be an integer from 1 to ${max} (got ${value})`);
    return +value;
  };
  const interval = integer('INTERVAL', MAX_INTERVAL) ?? 1;
  const count = integer('COUNT', MAX_COUNT);

  let byDay: RecurrenceRule['byDay'] = null;
  const byDayText = parts.get('BYDAY');
  if (byDayText !== undefined) {
    byDay = byDayText.split(',').map((entry) => {
      const m = /^([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)$/.exec(entry);
      if (!m) throw fail(`BYDAY must list weekdays MO, TU, WE, TH, FR, SA, SU (got ${JSON.stringify(entry)})`);
      if (m[1] === undefined) return { weekday: m[2], nth: null };
      const nth = Number(m[1]);
      if (freq !== 'MONTHLY') throw fail(`BYDAY ${entry}: an ordinal weekday is only allowed with FREQ=MONTHLY`);
      if (nth === 0 || Math.abs(nth) > 5) throw fail(`BYDAY ${entry}: the ordinal must be 1 to 5 or -1 to -5`);
      return { weekday: m[2], nth };
    });
  }

  let untilUtc: number | null = null;
  let untilLocal: number | null = null;
  const until = parts.get('UNTIL');
  if (until !== undefined) {
    if (count !== null) throw fail('COUNT and UNTIL must not both be given (RFC 5545)');
    const m = /^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})Z)?$/.exec(until);
    const isDate = m !== null && m[4] === undefined;
    const ms = m ? Date.UTC(+m[1], +m[2] - 1, +m[3], isDate ? 23 : +m[4], isDate ? 59 : +m[5], isDate ? 59 : +m[6]) : NaN;
    // Date.UTC rolls 20260230 over to March; the round trip refuses what is not a real date
    const valid = m !== null && !Number.isNaN(ms) && compactUtc(ms).startsWith(isDate ? until : until.slice(0, -1));
    if (!m || !valid) throw fail(`UNTIL must be a UTC date-time yyyymmddThhmmssZ or a date yyyymmdd (got ${until})`);
    if (isDate) untilLocal = ms;
    else untilUtc = ms;
  }

  return { normalized, freq: freq as RecurrenceRule['freq'], interval, byDay, count, untilUtc, untilLocal };
}

// ---------------------------------------------------------------------------------------------
// Occurrences

export interface OccurrenceQuery {
  /** Occurrences starting at or after this instant… */
  fromStart: number;
  /** …and strictly before this one. */
  toStart: number;
  /** At most this many, the earliest. */
  max?: number;
}

/** The occurrences of a schedule whose UTC start is in [fromStart, toStart), in time order. */
export function occurrencesOf(timing: ScheduleTiming, query: OccurrenceQuery): OccurrenceTime[] {
  return expandOccurrences(timing, query, true);
}

/**
 * `occurrencesOf`; with `fastForward` false rrule walks from `startsAt` itself, which the tests
 * use as the reference the fast-forwarded walk must match.
 */
export function expandOccurrences(timing: ScheduleTiming, query: OccurrenceQuery, fastForward: boolean): OccurrenceTime[] {
  const max = query.max ?? Infinity;
  const start = parseLocalDateTime(timing.startsAt, '/startsAt');
  const rule = timing.recurrence === null ? null : parseRecurrence(timing.recurrence, '/recurrence');
  const upper = rule?.untilUtc == null ? query.toStart : Math.min(query.toStart, rule.untilUtc + 1);
  const out: OccurrenceTime[] = [];
  // Local → UTC never goes backwards in time, so the first start past the window ends the walk.
  const accept = (local: number): boolean => {
    const utc = localToUtc(local, timing.timezone);
    if (utc >= upper) return false;
    if (utc >= query.fromStart && (out.length === 0 || out[out.length - 1].startAt < utc)) {
      out.push({ startAt: utc, endAt: utc + timing.durationMinutes * MINUTE, localStartAt: formatLocal(wallClockAt(utc, timing.timezone)) });
    }
    return out.length < max;
  };

  if (rule === null) {
    accept(start);
    return out;
  }
  if (upper <= query.fromStart) return out;
  // Floating time is within a day of UTC in every zone, so a day of margin on each side finds
  // every occurrence of the window; the exact bounds are applied after conversion.
  const walkFrom = query.fromStart - DAY;
  const origin = fastForward ? fastForwardOrigin(rule, start, walkFrom) : { start, skipped: 0, monthDay: null };
  if (origin === null || (rule.count !== null && origin.skipped >= rule.count)) return out;
  const rrule = new RRule(
    {
      freq: FREQUENCIES[rule.freq],
      interval: rule.interval,
      byweekday: rule.byDay?.map((d) => (d.nth === null ? WEEKDAYS[d.weekday] : WEEKDAYS[d.weekday].nth(d.nth))) ?? null,
      bymonthday: origin.monthDay,
      count: rule.count === null ? null : rule.count - origin.skipped,
      until: rule.untilLocal === null ? null : new Date(rule.untilLocal),
      dtstart: new Date(origin.start),
    },
    true,
  );
  rrule.between(new Date(walkFrom), new Date(upper + DAY), true, (date) => accept(date.getTime()));
  return out;
}

/**
 * Where rrule's walk may begin instead of `startsAt`: rrule finds the occurrences of a window by
 * stepping through every period from the rule's start, so a daily schedule begun years ago cost
 * thousands of steps on every calendar read (tens of milliseconds per schedule) and its cost grew
 * with the schedule's age. The walk is moved forward by whole periods of the rule (INTERVAL days,
 * weeks or months: floating time has no daylight-saving gaps, so a day is always 24 hours), to the
 * last such start at or before `walkFrom`. The rule's phase is kept: the same time of day, the
 * same weekday, every INTERVAL-th period counted from the original start. Answers that start, how
 * many occurrences came before it (for COUNT) and, for a monthly rule without BYDAY, the day of
 * the month the original start implied (the new start is moved to the 1st so that a 31st is not
 * rolled into the next month).
 *
 * The count before the new start is exact for DAILY and WEEKLY: one occurrence per period; for
 * WEEKLY with BYDAY one per listed weekday per period — the original start's first week and the
 * new start's first week are cut at the same weekday and time, so the part of the one that is
 * missing from the other adds up to a full week; for DAILY with BYDAY the period is
 * lcm(INTERVAL, 7) days, after which the candidate days fall on the same weekdays again. A
 * MONTHLY rule with COUNT keeps its start (months differ in how many of their days match, and
 * COUNT's 10 000 bounds that walk).
 *
 * Answers null for a rule no day ever matches (`neverMatches`): rrule would look for its first
 * occurrence until the year 9999, a quarter to most of a second per read.
 */
function fastForwardOrigin(rule: RecurrenceRule, start: number, walkFrom: number): { start: number; skipped: number; monthDay: number[] | null } | null {
  const unchanged = { start, skipped: 0, monthDay: null };
  if (neverMatches(rule, start)) return null;
  if (rule.freq === 'MONTHLY') {
    if (walkFrom <= start) return unchanged;
    if (rule.count !== null) return unchanged;
    const from = new Date(start);
    const to = new Date(walkFrom);
    const months = (to.getUTCFullYear() - from.getUTCFullYear()) * 12 + (to.getUTCMonth() - from.getUTCMonth());
    // the new start is the 1st of a month not after walkFrom's, at the rule's time of day: no
    // occurrence of that month is earlier, so none between walkFrom and it is lost
    const periods = Math.floor(months / rule.interval);
    if (periods <= 0) return unchanged;
    const shifted = Date.UTC(from.getUTCFullYear(), from.getUTCMonth() + periods * rule.interval, 1, from.getUTCHours(), from.getUTCMinutes(), from.getUTCSeconds());
    return { start: shifted, skipped: 0, monthDay: rule.byDay === null ? [from.getUTCDate()] : null };
  }
  const weekdays = rule.byDay === null ? null : new Set(rule.byDay.map((d) => d.weekday));
  let periodDays: number;
  let perPeriod: number;
  if (rule.freq === 'WEEKLY') {
    periodDays = 7 * rule.interval;
    perPeriod = weekdays?.size ?? 1;
  } else if (weekdays === null) {
    periodDays = rule.interval;
    perPeriod = 1;
  } else {
    // DAILY with BYDAY: the days every INTERVAL days fall on the same weekdays again after
    // lcm(INTERVAL, 7) days; count the listed ones among them
    periodDays = lcm(rule.interval, 7);
    perPeriod = 0;
    for (let day = 0; day < periodDays; day += rule.interval) {
      if (weekdays.has(WEEKDAY_CODES[new Date(start + day * DAY).getUTCDay()])) perPeriod++;
    }
  }
  const periods = Math.floor((walkFrom - start) / (periodDays * DAY));
  if (periods <= 0) return unchanged;
  return { start: start + periods * periodDays * DAY, skipped: periods * perPeriod, monthDay: null };
}

/**
 * The shapes of rule for which rrule would search for a first occurrence until the year 9999 (a
 * quarter to most of a second per read) because no day ever matches; the calendar answers
 * nothing for them at once. FREQ=DAILY with an INTERVAL that is a multiple of 7 lands on the
 * start's weekday only, so a BYDAY without it never matches. A MONTHLY BYDAY mixing ordinal
 * (1MO) and plain (TU) weekdays is read by rrule (like python-dateutil) as the days that are
 * both — `1MO,MO` is the first Monday — so it never matches when no plain weekday is one of the
 * ordinals'. A MONTHLY BYDAY of fifth weekdays only (5MO, -5FR) matches in the months that have
 * five of one of them, and the months an INTERVAL visits may have none before the year 9999,
 * where rrule stops looking: every fourth year's February from a year that is not a leap year
 * has 28 days (`noVisitedMonthHasAFifth`). New and changed schedules refuse all three
 * (`assertOccurs`, each with its reason); a schedule stored before those checks answers nothing.
 */
export function neverMatches(rule: RecurrenceRule, start: number): boolean {
  if (rule.byDay === null) return false;
  if (mixesOrdinals(rule)) {
    const plain = new Set(rule.byDay.filter((d) => d.nth === null).map((d) => d.weekday));
    return !rule.byDay.some((d) => d.nth !== null && plain.has(d.weekday));
  }
  if (rule.byDay.every((d) => d.nth !== null && Math.abs(d.nth) === 5)) return noVisitedMonthHasAFifth(rule, start);
  return rule.freq === 'DAILY' && rule.interval % 7 === 0 && !rule.byDay.some((d) => d.weekday === WEEKDAY_CODES[new Date(start).getUTCDay()]);
}

/** The last year rrule looks at: a rule with no occurrence until then is walked to it. */
const RRULE_LAST_YEAR = 9999;

/**
 * Whether none of the months a monthly rule visits (the start's, then every INTERVAL-th) up to
 * the last year rrule looks at has five of any weekday its BYDAY lists, so its fifth (or
 * fifth-from-last) weekdays never exist. A visited month that has one ends the search at once;
 * only a rule that never matches looks at every visited month (at most 96 000, and fewer than
 * 8 000 for the INTERVALs that can never match, multiples of 12: a few milliseconds).
 */
function noVisitedMonthHasAFifth(rule: RecurrenceRule, start: number): boolean {
  const weekdays = [...new Set(rule.byDay!.map((d) => WEEKDAY_CODES.indexOf(d.weekday)))];
  const begin = new Date(start);
  for (let month = begin.getUTCFullYear() * 12 + begin.getUTCMonth(); month < (RRULE_LAST_YEAR + 1) * 12; month += rule.interval) {
    const year = Math.floor(month / 12);
    const days = new Date(Date.UTC(year, (month % 12) + 1, 0)).getUTCDate();
    const firstWeekday = new Date(Date.UTC(year, month % 12, 1)).getUTCDay();
    // a month of `days` days has five of the weekdays among its first days - 28
    if (weekdays.some((w) => (w - firstWeekday + 7) % 7 < days - 28)) return false;
  }
  return true;
}

/** A BYDAY with both ordinal and plain weekdays; ordinals parse only with FREQ=MONTHLY, so the rule is monthly. */
function mixesOrdinals(rule: RecurrenceRule): boolean {
  return rule.byDay !== null && rule.byDay.some((d) => d.nth !== null) && rule.byDay.some((d) => d.nth === null);
}

/**
 * 400 when a new or changed schedule's rule would have no occurrence at all, naming `pointer`
 * (the field the request changed). A MONTHLY BYDAY mixing ordinal and plain weekdays is refused
 * whatever it gives: RFC 5545 reads it as either, our recurrence library as both. Otherwise the
 * first occurrence is looked for up to the end of the last year a start may have: none (an
 * UNTIL before the start) is refused. The rules no day ever matches (`neverMatches`) are refused
 * first, each with its reason: a DAILY rule that never lands on its BYDAY, a fifth Monday of every
 * fourth February from a year that is not a leap year.
 */
export function assertOccurs(timing: ScheduleTiming, pointer: string): void {
  if (timing.recurrence === null) return;
  const rule = parseRecurrence(timing.recurrence, '/recurrence');
  const start = parseLocalDateTime(timing.startsAt, '/startsAt');
  if (mixesOrdinals(rule)) {
    throw invalidField(pointer, 'BYDAY with FREQ=MONTHLY must list either ordinal weekdays (1MO, -1FR) or plain weekdays (MO, FR), not both');
  }
  if (neverMatches(rule, start)) {
    // the two shapes left that never match: a DAILY rule whose days are all the start's weekday,
    // and a MONTHLY rule of fifth weekdays whose months never have five of them
    if (rule.freq === 'MONTHLY') {
      throw invalidField(pointer, `never occurs: none of the months the rule visits (every ${rule.interval} from the month of startsAt) has five of the weekdays BYDAY names`);
    }
    const weekday = WEEKDAY_CODES[new Date(start).getUTCDay()];
    throw invalidField(pointer, `never occurs: with FREQ=DAILY and INTERVAL=${rule.interval} every occurrence falls on the weekday of startsAt (${weekday}), which BYDAY does not list`);
  }
  const first = occurrencesOf(timing, { fromStart: start - 2 * DAY, toStart: Date.UTC(MAX_YEAR + 1, 0, 1), max: 1 });
  if (!first.length) throw invalidField(pointer, `never occurs: the rule has no occurrence from startsAt to the end of ${MAX_YEAR}`);
}

/** `getUTCDay()` → the RRULE weekday code. */
const WEEKDAY_CODES = ['SU', 'MO', 'TU', 'WE', 'TH', 'FR', 'SA'];

function lcm(a: number, b: number): number {
  let [x, y] = [a, b];
  while (y) [x, y] = [y, x % y];
  return (a / x) * b;
}

const OCCURRENCE_ID = /^occ_([0-9a-z]{24})_(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

/** `occ_<schedule id without "sch_">_<UTC start as yyyymmddThhmmssZ>`. */
export function occurrenceId(scheduleId: string, startAt: number): string {
  return `occ_${scheduleId.replace(/^sch_/, '')}_${compactUtc(startAt)}`;
}

/** `yyyymmddThhmmssZ`, the RFC 5545 form of a UTC date-time. */
function compactUtc(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]|\.\d{3}/g, '');
}

/** The schedule id and UTC start an occurrence id names, or undefined when it is not one. */
export function parseOccurrenceId(id: string): { scheduleId: string; startAt: number } | undefined {
  const m = OCCURRENCE_ID.exec(id);
  if (!m) return undefined;
  const startAt = Date.UTC(+m[2], +m[3] - 1, +m[4], +m[5], +m[6], +m[7]);
  if (Number.isNaN(startAt) || occurrenceId(`sch_${m[1]}`, startAt) !== id) return undefined;
  return { scheduleId: `sch_${m[1]}`, startAt };
}
