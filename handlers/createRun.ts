import { defineHandler } from '../runtime/http/handler';
import { invalidField } from '../runtime/errors';
import { findTemplate } from '../runtime/storage/repositories/templatesRepository';
import { findSchedule } from '../runtime/storage/repositories/schedulesRepository';
import { isOccurrenceOf, scheduleIdOfOccurrence } from '../runtime/domain/calendar';
import { createRun } from '../runtime/storage/repositories/runsRepository';

// A missing template is a problem with the request body, not with the addressed resource
// (POST /v1/runs exists), hence 400 naming the field rather than 404.
export default defineHandler('createRun', async ({ db, principal, body }) => {
  const template = await findTemplate(db, principal.orgId, body.templateId);
  if (!template) throw invalidField('/templateId', `does not name a template of this organization (got ${body.templateId})`);
  if (body.occurrenceId !== undefined) {
    const scheduleId = scheduleIdOfOccurrence(body.occurrenceId);
    const schedule = scheduleId === undefined ? undefined : await findSchedule(db, principal.orgId, scheduleId);
    if (!schedule || !isOccurrenceOf(schedule, body.occurrenceId)) throw invalidField('/occurrenceId', 'does not name an occurrence of any schedule of this organization');
    if (schedule.templateId !== body.templateId) throw invalidField('/templateId', `must be the occurrence's template ${schedule.templateId}`);
    if (schedule.siteId !== body.siteId) throw invalidField('/siteId', `must be the occurrence's site ${schedule.siteId}`);
  }
  const run = await createRun(db, principal.orgId, { ...body, templateVersion: template.version });
  return { status: 201, body: run, headers: { Location: `/v1/runs/${run.id}` } };
});
