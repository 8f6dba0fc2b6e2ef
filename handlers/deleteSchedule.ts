import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { deleteSchedule } from '../runtime/storage/repositories/schedulesRepository';

export default defineHandler('deleteSchedule', async ({ db, principal, path }) => {
  if (!(await deleteSchedule(db, principal.orgId, path.id))) throw notFound('schedule', path.id);
  return { status: 204 };
});
