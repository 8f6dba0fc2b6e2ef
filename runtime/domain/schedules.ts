import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { notFound } from '../errors';
import { assertTimeZone } from './timeZones';
import { parseLocalDateTime, parseRecurrence } from './recurrence';
import { checkReferences } from './references';
import * as schedules from '../storage/repositories/schedulesRepository';
import type { Schedule } from '../storage/repositories/schedulesRepository';

type ScheduleCreate = components['schemas']['ScheduleCreate'];
type ScheduleUpdate = components['schemas']['ScheduleUpdate'];

/**
 * Every write of a schedule. `trx` is the request's transaction; each returns the schedule as
 * GET shows it. `startsAt` is a wall-clock time in the schedule's time zone and the recurrence
 * is stored normalized; the calendar (calendar.ts) projects schedules into occurrences.
 */

export async function createSchedule(trx: Knex, orgId: string, body: ScheduleCreate): Promise<Schedule> {
  assertTimeZone(body.timezone, '/timezone');
  parseLocalDateTime(body.startsAt, '/startsAt');
  const recurrence = body.recurrence === undefined ? null : parseRecurrence(body.recurrence, '/recurrence').normalized;
  await checkReferences(trx, orgId, [
    { pointer: '/templateId', kind: 'template', id: body.templateId },
    { pointer: '/siteId', kind: 'site', id: body.siteId },
  ]);
  return schedules.insertSchedule(trx, orgId, {
    templateId: body.templateId,
    siteId: body.siteId,
    assigneeUserId: body.assigneeUserId ?? null,
    timezone: body.timezone,
    startsAt: body.startsAt,
    durationMinutes: body.durationMinutes ?? 60,
    recurrence,
  });
}

export async function updateSchedule(trx: Knex, orgId: string, id: string, changes: ScheduleUpdate): Promise<Schedule> {
  if (changes.timezone !== undefined) assertTimeZone(changes.timezone, '/timezone');
  if (changes.startsAt !== undefined) parseLocalDateTime(changes.startsAt, '/startsAt');
  const recurrence = typeof changes.recurrence === 'string' ? parseRecurrence(changes.recurrence, '/recurrence').normalized : changes.recurrence;
  const before = await schedules.findSchedule(trx, orgId, id);
  if (!before) throw notFound('schedule', id);
  await checkReferences(trx, orgId, [
    { pointer: '/templateId', kind: 'template', id: changes.templateId, unchanged: before.templateId },
    { pointer: '/siteId', kind: 'site', id: changes.siteId, unchanged: before.siteId },
  ]);
  if (!(await schedules.updateSchedule(trx, orgId, id, { ...changes, recurrence }))) throw notFound('schedule', id);
  return (await schedules.findSchedule(trx, orgId, id))!;
}

export async function deleteSchedule(trx: Knex, orgId: string, id: string): Promise<void> {
  if (!(await schedules.deleteSchedule(trx, orgId, id))) throw notFound('schedule', id);
}
