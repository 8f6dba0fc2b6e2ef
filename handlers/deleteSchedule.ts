import { defineHandler } from '../runtime/http/handler';
import { deleteSchedule } from '../runtime/domain/schedules';

export default defineHandler('deleteSchedule', async ({ db, principal, path }) => {
  await deleteSchedule(db, principal.orgId, path.id);
  return { status: 204 };
});
