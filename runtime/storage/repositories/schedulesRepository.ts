import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { localInstant, nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import type { ListFilters } from '../listFilters';
import { restoreUpdatedAt } from './updatedAt';

export type Schedule = components['schemas']['Schedule'];

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

function toSchedule(row: ScheduleRow): Schedule {
  return {
    id: row.id,
    templateId: row.template_id,
    siteId: row.site_id,
    assigneeUserId: row.assignee_user_id,
    timezone: row.timezone,
    startsAt: row.starts_at,
    startsAtUtc: localInstant(row.starts_at, row.timezone),
    durationMinutes: Number(row.duration_minutes),
    recurrence: row.recurrence,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** A schedule's fields as the domain (runtime/domain/schedules.ts) has checked and normalized them. */
export interface ScheduleContent {
  templateId: string;
  siteId: string;
  assigneeUserId: string | null;
  timezone: string;
  startsAt: string;
  durationMinutes: number;
  recurrence: string | null;
}

export async function insertSchedule(db: Knex, orgId: string, content: ScheduleContent): Promise<Schedule> {
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

/**
 * Reads a live schedule that a write names, and locks it shared until the caller's transaction ends:
 * as sitesRepository.findSiteForReference does for a site.
 */
export async function findScheduleForReference(db: Knex, orgId: string, id: string): Promise<Schedule | undefined> {
  const row = await db<ScheduleRow>('schedules').where({ org_id: orgId, id }).first().forKeyShare();
  return row && toSchedule(row);
}

/** Reads and locks a schedule (Postgres) until the caller's transaction ends: the state an update starts from. */
export async function findScheduleForUpdate(db: Knex, orgId: string, id: string): Promise<Schedule | undefined> {
  const row = await db<ScheduleRow>('schedules').where({ org_id: orgId, id }).first().forUpdate();
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

/** Applies the fields present in `changes`; false when the schedule does not exist. */
export async function updateSchedule(db: Knex, orgId: string, id: string, changes: Partial<ScheduleContent>): Promise<boolean> {
  const columns: Partial<ScheduleRow> = { updated_at: nowIso() };
  if (changes.templateId !== undefined) columns.template_id = changes.templateId;
  if (changes.siteId !== undefined) columns.site_id = changes.siteId;
  if (changes.assigneeUserId !== undefined) columns.assignee_user_id = changes.assigneeUserId;
  if (changes.timezone !== undefined) columns.timezone = changes.timezone;
  if (changes.startsAt !== undefined) columns.starts_at = changes.startsAt;
  if (changes.durationMinutes !== undefined) columns.duration_minutes = changes.durationMinutes;
  if (changes.recurrence !== undefined) columns.recurrence = changes.recurrence;
  return (await db('schedules').where({ org_id: orgId, id }).update(columns)) > 0;
}

export async function deleteSchedule(db: Knex, orgId: string, id: string): Promise<boolean> {
  return (await db('schedules').where({ org_id: orgId, id }).delete()) > 0;
}

/** Every schedule matching the filters (the calendar projects them all; runtime/domain/calendar.ts). */
export async function schedulesForCalendar(db: Knex, orgId: string, filters: ScheduleFilters & { scheduleId?: string }): Promise<Schedule[]> {
  return (await filtered(db, orgId, filters)).map(toSchedule);
}

/** Puts a schedule's updatedAt back after an update that changed nothing (domain/events.ts, finishUpdate). */
export const restoreScheduleUpdatedAt = (db: Knex, orgId: string, id: string, updatedAt: string): Promise<void> => restoreUpdatedAt(db, 'schedules', orgId, id, updatedAt);
