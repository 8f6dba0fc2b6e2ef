import { defineHandler } from '../runtime/http/handler';
import { invalidField } from '../runtime/errors';
import { assertTimeZone } from '../runtime/domain/timeZones';
import { parseRecurrence, resolveStartsAt } from '../runtime/domain/recurrence';
import { findTemplate } from '../runtime/storage/repositories/templatesRepository';
import { createSchedule } from '../runtime/storage/repositories/schedulesRepository';

export default defineHandler('createSchedule', async ({ db, principal, body }) => {
  assertTimeZone(body.timezone, '/timezone');
  const startsAt = resolveStartsAt(body.startsAt, body.timezone, '/startsAt');
  const recurrence = body.recurrence === undefined ? null : parseRecurrence(body.recurrence, '/recurrence').normalized;
  if (!(await findTemplate(db, principal.orgId, body.templateId))) {
    throw invalidField('/templateId', `does not name a template of this organization (got ${body.templateId})`);
  }
  const schedule = await createSchedule(db, principal.orgId, {
    templateId: body.templateId,
    siteId: body.siteId,
    assigneeUserId: body.assigneeUserId ?? null,
    timezone: body.timezone,
    startsAt,
    durationMinutes: body.durationMinutes ?? 60,
    recurrence,
  });
  return { status: 201, body: schedule, headers: { Location: `/v1/schedules/${schedule.id}` } };
});
