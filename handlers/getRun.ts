import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findRun } from '../runtime/storage/repositories/runsRepository';

export default defineHandler('getRun', async ({ db, principal, path }) => {
  const run = await findRun(db, principal.orgId, path.id);
  if (!run) throw notFound('run', path.id);
  return { status: 200, body: run };
});
