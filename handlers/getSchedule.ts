import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findSchedule } from '../runtime/storage/repositories/schedulesRepository';

export default defineHandler('getSchedule', async ({ db, principal, path }) => {
  const schedule = await findSchedule(db, principal.orgId, path.id);
  if (!schedule) throw notFound('schedule', path.id);
  return { status: 200, body: schedule };
});
