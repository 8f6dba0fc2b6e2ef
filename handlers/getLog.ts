import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findLog } from '../runtime/storage/repositories/logsRepository';

export default defineHandler('getLog', async ({ db, principal, path }) => {
  const log = await findLog(db, principal.orgId, path.id);
  if (!log) throw notFound('log entry', path.id);
  return { status: 200, body: log };
});
