import { defineHandler } from '../runtime/http/handler';
import { invalidField, notFound } from '../runtime/errors';
import { assertTimeZone } from '../runtime/domain/timeZones';
import { parseRecurrence } from '../runtime/domain/recurrence';
import { startsAtForUpdate } from '../runtime/domain/scheduleStart';
import { findTemplate } from '../runtime/storage/repositories/templatesRepository';
import { updateSchedule } from '../runtime/storage/repositories/schedulesRepository';

export default defineHandler('updateSchedule', async ({ db, principal, path, body }) => {
  if (body.timezone !== undefined) assertTimeZone(body.timezone, '/timezone');
  const startsAt = await startsAtForUpdate(db, principal.orgId, path.id, body);
  const recurrence = typeof body.recurrence === 'string' ? parseRecurrence(body.recurrence, '/recurrence').normalized : body.recurrence;
  if (body.templateId !== undefined && !(await findTemplate(db, principal.orgId, body.templateId))) {
    throw invalidField('/templateId', `does not name a template of this organization (got ${body.templateId})`);
  }
  const schedule = await updateSchedule(db, principal.orgId, path.id, { ...body, startsAt, recurrence });
  if (!schedule) throw notFound('schedule', path.id);
  return { status: 200, body: schedule };
});
