import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { notFound } from '../errors';
import { storedTimeZone } from './timeZones';
import { assertOccurs, parseRecurrence, resolveStartsAt } from './recurrence';
import { checkReferences } from './references';
import { finishUpdate, recordEvent, tombstone } from './events';
import * as schedules from '../storage/repositories/schedulesRepository';
import type { Schedule } from '../storage/repositories/schedulesRepository';

type ScheduleCreate = components['schemas']['ScheduleCreate'];
type ScheduleUpdate = components['schemas']['ScheduleUpdate'];

/**
 * Every write of a schedule. `trx` is the request's transaction; each returns the schedule as
 * GET shows it and records its event last. `startsAt` is stored as a wall-clock time in the schedule's time zone (an
 * instant sent with an offset is converted to it) and the recurrence
 * is stored normalized; the calendar (calendar.ts) projects schedules into occurrences.
 */

export async function createSchedule(trx: Knex, orgId: string, input: ScheduleCreate): Promise<Schedule> {
  const body = { ...input, timezone: storedTimeZone(input.timezone, '/timezone') };
  const startsAt = resolveStartsAt(body.startsAt, body.timezone, '/startsAt');
  const recurrence = body.recurrence === undefined ? null : parseRecurrence(body.recurrence, '/recurrence').normalized;
  assertOccurs({ timezone: body.timezone, startsAt, durationMinutes: 0, recurrence }, '/recurrence');
  await checkReferences(trx, orgId, [
    { pointer: '/templateId', kind: 'template', id: body.templateId },
    { pointer: '/siteId', kind: 'site', id: body.siteId },
  ]);
  const schedule = await schedules.insertSchedule(trx, orgId, {
    templateId: body.templateId,
    siteId: body.siteId,
    assigneeUserId: body.assigneeUserId ?? null,
    timezone: body.timezone,
    startsAt,
    durationMinutes: body.durationMinutes ?? 60,
    recurrence,
  });
  await recordEvent(trx, orgId, { type: 'schedule.created', data: schedule });
  return schedule;
}

export async function updateSchedule(trx: Knex, orgId: string, id: string, input: ScheduleUpdate): Promise<Schedule> {
  const changes = input.timezone === undefined ? input : { ...input, timezone: storedTimeZone(input.timezone, '/timezone') };
  const recurrence = typeof changes.recurrence === 'string' ? parseRecurrence(changes.recurrence, '/recurrence').normalized : changes.recurrence;
  const before = await schedules.findScheduleForUpdate(trx, orgId, id);
  if (!before) throw notFound('schedule', id);
  await checkReferences(trx, orgId, [
    { pointer: '/templateId', kind: 'template', id: changes.templateId, unchanged: before.templateId },
    { pointer: '/siteId', kind: 'site', id: changes.siteId, unchanged: before.siteId },
  ]);
  // an instant with an offset is read in the time zone the schedule will have: the one sent
  // alongside, else the stored one
  const startsAt = changes.startsAt === undefined ? undefined : resolveStartsAt(changes.startsAt, changes.timezone ?? before.timezone, '/startsAt');
  // checked when the rule or its start changes: a schedule stored before the check keeps accepting other changes
  if (recurrence !== undefined || startsAt !== undefined) {
    const timing = { timezone: changes.timezone ?? before.timezone, startsAt: startsAt ?? before.startsAt, durationMinutes: 0, recurrence: recurrence === undefined ? before.recurrence : recurrence };
    assertOccurs(timing, recurrence === undefined ? '/startsAt' : '/recurrence');
  }
  if (!(await schedules.updateSchedule(trx, orgId, id, { ...changes, startsAt, recurrence }))) throw notFound('schedule', id);
  const after = (await schedules.findSchedule(trx, orgId, id))!;
  return finishUpdate(trx, orgId, 'schedule.updated', before, after, (at) => schedules.restoreScheduleUpdatedAt(trx, orgId, id, at));
}

export async function deleteSchedule(trx: Knex, orgId: string, id: string): Promise<void> {
  // read with a lock first, as an update does: a write of the same schedule in the same Postgres
  // group commit is then told apart (storage/pgGroupCommit.ts, rowLockedBy)
  if (!(await schedules.findScheduleForUpdate(trx, orgId, id)) || !(await schedules.deleteSchedule(trx, orgId, id))) throw notFound('schedule', id);
  await recordEvent(trx, orgId, { type: 'schedule.deleted', data: tombstone(id) });
}
