import { defineHandler } from '../runtime/http/handler';
import { updateSchedule } from '../runtime/domain/schedules';

export default defineHandler('updateSchedule', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateSchedule(db, principal.orgId, path.id, body),
}));
