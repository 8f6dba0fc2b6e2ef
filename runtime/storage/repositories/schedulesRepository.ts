import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { occurrenceId, occurrencesOf, OccurrenceTime, parseOccurrenceId, ScheduleTiming } from '../../domain/recurrence';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import { decodeCursor, encodeCursor, fetchPage, malformedCursor, Page, PageRequest } from '../pagination';
import { runsOfOccurrences } from './runsRepository';
import { lockForOrderedInsert } from '../orderedInsert';
import type { ListFilters } from '../listFilters';

export type Schedule = components['schemas']['Schedule'];
export type Occurrence = components['schemas']['Occurrence'];

interface ScheduleRow {
  seq: number;
  id: string;
  org_id: string;
  template_id: string;
  site_id: string;
  assignee_user_id: string | null;
  timezone: string;
  starts_at: string;
  duration_minutes: number;
  recurrence: string | null;
  created_at: string;
  updated_at: string;
}

const MINUTE = 60_000;

function toSchedule(row: ScheduleRow): Schedule {
  return {
    id: row.id,
    templateId: row.template_id,
    siteId: row.site_id,
    assigneeUserId: row.assignee_user_id,
    timezone: row.timezone,
    startsAt: row.starts_at,
    durationMinutes: Number(row.duration_minutes),
    recurrence: row.recurrence,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A schedule's fields as the handlers have checked and normalized them. */
export interface ScheduleContent {
  templateId: string;
  siteId: string;
  assigneeUserId: string | null;
  timezone: string;
  startsAt: string;
  durationMinutes: number;
  recurrence: string | null;
}

export async function createSchedule(db: Knex, orgId: string, content: ScheduleContent): Promise<Schedule> {
  const now = nowIso();
  const row: Omit<ScheduleRow, 'seq'> = {
    id: newId('sch'),
    org_id: orgId,
    template_id: content.templateId,
    site_id: content.siteId,
    assignee_user_id: content.assigneeUserId,
    timezone: content.timezone,
    starts_at: content.startsAt,
    duration_minutes: content.durationMinutes,
    recurrence: content.recurrence,
    created_at: now,
    updated_at: now,
  };
  await lockForOrderedInsert(db, 'schedules', orgId);
  await db('schedules').insert(row);
  return toSchedule({ seq: 0, ...row });
}

export async function findSchedule(db: Knex, orgId: string, id: string): Promise<Schedule | undefined> {
  const row = await db<ScheduleRow>('schedules').where({ org_id: orgId, id }).first();
  return row && toSchedule(row);
}

export type ScheduleFilters = ListFilters<'listSchedules'>;

function filtered(db: Knex, orgId: string, filters: ScheduleFilters & { scheduleId?: string }) {
  const query = db<ScheduleRow>('schedules').where({ org_id: orgId });
  if (filters.siteId !== undefined) query.where({ site_id: filters.siteId });
  if (filters.assigneeUserId !== undefined) query.where({ assignee_user_id: filters.assigneeUserId });
  if (filters.templateId !== undefined) query.where({ template_id: filters.templateId });
  if (filters.scheduleId !== undefined) query.where({ id: filters.scheduleId });
  return query;
}

export async function listSchedules(db: Knex, orgId: string, filters: ScheduleFilters, page: PageRequest): Promise<Page<Schedule>> {
  return fetchPage(filtered(db, orgId, filters), ['seq'], page, toSchedule);
}

/** Applies the fields present in `changes`; undefined when the schedule does not exist. */
export async function updateSchedule(db: Knex, orgId: string, id: string, changes: Partial<ScheduleContent>): Promise<Schedule | undefined> {
  const columns: Partial<ScheduleRow> = { updated_at: nowIso() };
  if (changes.templateId !== undefined) columns.template_id = changes.templateId;
  if (changes.siteId !== undefined) columns.site_id = changes.siteId;
  if (changes.assigneeUserId !== undefined) columns.assignee_user_id = changes.assigneeUserId;
  if (changes.timezone !== undefined) columns.timezone = changes.timezone;
  if (changes.startsAt !== undefined) columns.starts_at = changes.startsAt;
  if (changes.durationMinutes !== undefined) columns.duration_minutes = changes.durationMinutes;
  if (changes.recurrence !== undefined) columns.recurrence = changes.recurrence;
  const updated = await db('schedules').where({ org_id: orgId, id }).update(columns);
  return updated ? findSchedule(db, orgId, id) : undefined;
}

export async function deleteSchedule(db: Knex, orgId: string, id: string): Promise<boolean> {
  return (await db('schedules').where({ org_id: orgId, id }).delete()) > 0;
}

// ---------------------------------------------------------------------------------------------
// Calendar occurrences: computed from the schedules on every read, never stored.

export interface OccurrenceWindow {
  /** Epoch milliseconds; occurrences overlapping [from, to) are listed. */
  from: number;
  to: number;
}

export type OccurrenceFilters = ScheduleFilters & { scheduleId?: string };

function timingOf(row: ScheduleRow): ScheduleTiming {
  return { timezone: row.timezone, startsAt: row.starts_at, durationMinutes: Number(row.duration_minutes), recurrence: row.recurrence };
}

function toOccurrence(row: ScheduleRow, time: OccurrenceTime, run: { id: string; status: Occurrence['runStatus'] } | undefined): Occurrence {
  return {
    id: occurrenceId(row.id, time.startAt),
    scheduleId: row.id,
    templateId: row.template_id,
    siteId: row.site_id,
    assigneeUserId: row.assignee_user_id,
    startAt: new Date(time.startAt).toISOString(),
    endAt: new Date(time.endAt).toISOString(),
    localStartAt: time.localStartAt,
    timezone: row.timezone,
    runId: run?.id ?? null,
    runStatus: run?.status ?? null,
  };
}

/**
 * One page of occurrences ordered by (startAt, scheduleId). The keyset runs over the computed
 * list: the cursor holds the (startAt, scheduleId) of the last occurrence, and each schedule is
 * asked only for the limit + 1 occurrences after it, so a page costs O(schedules × limit).
 */
export async function listOccurrences(
  db: Knex,
  orgId: string,
  window: OccurrenceWindow,
  filters: OccurrenceFilters,
  page: PageRequest,
): Promise<Page<Occurrence>> {
  const after = page.cursor === undefined ? undefined : decodeOccurrenceCursor(page.cursor);
  const schedules: ScheduleRow[] = await filtered(db, orgId, filters);
  const found: { row: ScheduleRow; time: OccurrenceTime }[] = [];
  for (const row of schedules) {
    // overlapping the window means endAt > from, i.e. startAt >= from - duration + 1 ms
    let fromStart = window.from - Number(row.duration_minutes) * MINUTE + 1;
    if (after) fromStart = Math.max(fromStart, row.id > after.scheduleId ? after.startAt : after.startAt + 1);
    for (const time of occurrencesOf(timingOf(row), { fromStart, toStart: window.to, max: page.limit + 1 })) found.push({ row, time });
  }
  found.sort((a, b) => a.time.startAt - b.time.startAt || (a.row.id < b.row.id ? -1 : a.row.id > b.row.id ? 1 : 0));
  const hasMore = found.length > page.limit;
  const onPage = found.slice(0, page.limit);
  const runs = await runsOfOccurrences(db, orgId, onPage.map((o) => occurrenceId(o.row.id, o.time.startAt)));
  const last = onPage[onPage.length - 1];
  return {
    data: onPage.map((o) => toOccurrence(o.row, o.time, runs.get(occurrenceId(o.row.id, o.time.startAt)))),
    nextCursor: hasMore && last ? encodeOccurrenceCursor(last.time.startAt, last.row.id) : null,
  };
}

function encodeOccurrenceCursor(startAt: number, scheduleId: string): string {
  return encodeCursor([new Date(startAt).toISOString(), scheduleId]);
}

function decodeOccurrenceCursor(cursor: string): { startAt: number; scheduleId: string } {
  const [startAt, scheduleId] = decodeCursor(cursor, ['text', 'text']) as [string, string];
  const ms = Date.parse(startAt);
  if (Number.isNaN(ms)) throw malformedCursor();
  return { startAt: ms, scheduleId };
}

/** The schedule of an occurrence id, when the id names a real occurrence of one of the organization's schedules. */
export async function findOccurrenceSchedule(db: Knex, orgId: string, id: string): Promise<Schedule | undefined> {
  const parsed = parseOccurrenceId(id);
  if (!parsed) return undefined;
  const row = await db<ScheduleRow>('schedules').where({ org_id: orgId, id: parsed.scheduleId }).first();
  if (!row) return undefined;
  const hit = occurrencesOf(timingOf(row), { fromStart: parsed.startAt, toStart: parsed.startAt + 1, max: 1 });
  return hit.length ? toSchedule(row) : undefined;
}
