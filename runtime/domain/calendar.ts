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
 * One page of occurrences ordered by (startAt, scheduleId). The keyset runs over the computed
 * list: the cursor holds the (startAt, scheduleId) of the last occurrence, and each schedule is
 * asked only for the limit + 1 occurrences after it, so a page costs O(schedules × limit).
 */
export function occurrencePage(
  schedules: readonly Schedule[],
  window: OccurrenceWindow,
  page: PageRequest,
): { items: ScheduledOccurrence[]; nextCursor: string | null } {
  const after = page.cursor === undefined ? undefined : decodeOccurrenceCursor(page.cursor);
  const found: ScheduledOccurrence[] = [];
  for (const schedule of schedules) {
    // overlapping the window means endAt > from, i.e. startAt >= from - duration + 1 ms
    let fromStart = window.from - schedule.durationMinutes * MINUTE + 1;
    if (after) fromStart = Math.max(fromStart, schedule.id > after.scheduleId ? after.startAt : after.startAt + 1);
    for (const time of occurrencesOf(schedule, { fromStart, toStart: window.to, max: page.limit + 1 })) {
      found.push({ id: occurrenceId(schedule.id, time.startAt), schedule, time });
    }
  }
  found.sort((a, b) => a.time.startAt - b.time.startAt || (a.schedule.id < b.schedule.id ? -1 : a.schedule.id > b.schedule.id ? 1 : 0));
  const items = found.slice(0, page.limit);
  const last = items[items.length - 1];
  return { items, nextCursor: found.length > page.limit && last ? encodeOccurrenceCursor(last.time.startAt, last.schedule.id) : null };
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
  if (!parsed || parsed.scheduleId !== schedule.id) return false;
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
