import type { components } from '../../generated/types';
import { decodeCursor, encodeCursor, MalformedCursorError, type PageRequest } from '../cursor';
import { occurrenceId, occurrencesOf, OccurrenceTime, parseOccurrenceId } from './recurrence';

/**
 * The calendar: schedules projected into occurrences, computed on every read and never stored.
 * Pure: the caller reads the schedules and the runs (storage), this decides what a page holds.
 */
export type Schedule = components['schemas']['Schedule'];
export type Occurrence = components['schemas']['Occurrence'];

export interface OccurrenceWindow {
  /** Epoch milliseconds; occurrences overlapping [from, to) are listed. */
  from: number;
  to: number;
}

export interface ScheduledOccurrence {
  id: string;
  schedule: Schedule;
  time: OccurrenceTime;
}

const MINUTE = 60_000;

/**
 * The last instant a timestamp of the API can name (`9999-12-31T23:59:59.999Z`: RFC 3339 has
 * four-digit years). An occurrence that would end after it is not one: it is neither listed nor
 * accepted as a run's occurrence.
 */
const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** Starts before this (exclusive) end by LAST_INSTANT. */
function lastStartOf(schedule: Schedule): number {
  return LAST_INSTANT - schedule.durationMinutes * MINUTE + 1;
}

/**
 * One page of occurrences ordered by (startAt, scheduleId). The keyset runs over the computed
 * list: the cursor holds the (startAt, scheduleId) of the last occurrence, and each schedule is
 * read from just after it. Each schedule is asked for a few occurrences at a time (a share of the
 * page, then twice as many), and again only while its last one read still sorts before the
 * page's end: a page costs about O(schedules + limit) occurrences, where asking every schedule
 * for a whole page cost O(schedules × limit) — 51 000 occurrences for a page of 50 from 1 000
 * daily schedules.
 */
export function occurrencePage(
  schedules: readonly Schedule[],
  window: OccurrenceWindow,
  page: PageRequest,
): { items: ScheduledOccurrence[]; nextCursor: string | null } {
  const after = page.cursor === undefined ? undefined : decodeOccurrenceCursor(page.cursor);
  const wanted = page.limit + 1;
  const streams = schedules.map((schedule) => {
    // overlapping the window means endAt > from, i.e. startAt >= from - duration + 1 ms
    let fromStart = window.from - schedule.durationMinutes * MINUTE + 1;
    if (after) fromStart = Math.max(fromStart, schedule.id > after.scheduleId ? after.startAt : after.startAt + 1);
    return { schedule, fromStart, read: [] as ScheduledOccurrence[], exhausted: false };
  });
  const readMore = (stream: (typeof streams)[number], count: number) => {
    const times = occurrencesOf(stream.schedule, { fromStart: stream.fromStart, toStart: Math.min(window.to, lastStartOf(stream.schedule)), max: count });
    for (const time of times) stream.read.push({ id: occurrenceId(stream.schedule.id, time.startAt), schedule: stream.schedule, time });
    if (times.length < count) stream.exhausted = true;
    else stream.fromStart = times[times.length - 1].startAt + 1;
  };
  const share = Math.min(wanted, Math.ceil(wanted / Math.max(1, streams.length)) + 1);
  for (const stream of streams) readMore(stream, share);
  for (;;) {
    const found = streams.flatMap((stream) => stream.read).sort(byStartThenSchedule);
    const end = found.length >= wanted ? found[wanted - 1] : undefined;
    // a schedule with more to read may hold occurrences before the page's end
    const behind = streams.filter((stream) => !stream.exhausted && (end === undefined || byStartThenSchedule(stream.read[stream.read.length - 1], end) < 0));
    if (!behind.length) {
      const items = found.slice(0, page.limit);
      const last = items[items.length - 1];
      return { items, nextCursor: found.length > page.limit && last ? encodeOccurrenceCursor(last.time.startAt, last.schedule.id) : null };
    }
    for (const stream of behind) readMore(stream, Math.min(wanted, stream.read.length));
  }
}

function byStartThenSchedule(a: ScheduledOccurrence, b: ScheduledOccurrence): number {
  return a.time.startAt - b.time.startAt || (a.schedule.id < b.schedule.id ? -1 : a.schedule.id > b.schedule.id ? 1 : 0);
}

export function toOccurrence(o: ScheduledOccurrence, run: { id: string; status: Occurrence['runStatus'] } | undefined): Occurrence {
  return {
    id: o.id,
    scheduleId: o.schedule.id,
    templateId: o.schedule.templateId,
    siteId: o.schedule.siteId,
    assigneeUserId: o.schedule.assigneeUserId,
    startAt: new Date(o.time.startAt).toISOString(),
    endAt: new Date(o.time.endAt).toISOString(),
    localStartAt: o.time.localStartAt,
    timezone: o.schedule.timezone,
    runId: run?.id ?? null,
    runStatus: run?.status ?? null,
  };
}

/** The schedule id an occurrence id names, if it is shaped like one. */
export function scheduleIdOfOccurrence(id: string): string | undefined {
  return parseOccurrenceId(id)?.scheduleId;
}

/** True when `id` is a real occurrence of `schedule` (its start is one the recurrence produces). */
export function isOccurrenceOf(schedule: Schedule, id: string): boolean {
  const parsed = parseOccurrenceId(id);
  if (!parsed || parsed.scheduleId !== schedule.id || parsed.startAt >= lastStartOf(schedule)) return false;
  return occurrencesOf(schedule, { fromStart: parsed.startAt, toStart: parsed.startAt + 1, max: 1 }).length > 0;
}

function encodeOccurrenceCursor(startAt: number, scheduleId: string): string {
  return encodeCursor([new Date(startAt).toISOString(), scheduleId]);
}

function decodeOccurrenceCursor(cursor: string): { startAt: number; scheduleId: string } {
  const [startAt, scheduleId] = decodeCursor(cursor, ['text', 'text']) as [string, string];
  const ms = Date.parse(startAt);
  if (Number.isNaN(ms)) throw new MalformedCursorError();
  return { startAt: ms, scheduleId };
}
