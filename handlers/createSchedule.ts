import { defineHandler } from '../runtime/http/handler';
import { createSchedule } from '../runtime/domain/schedules';

export default defineHandler('createSchedule', async ({ db, principal, body }) => {
  const schedule = await createSchedule(db, principal.orgId, body);
  return { status: 201, body: schedule, headers: { Location: `/v1/schedules/${schedule.id}` } };
});
