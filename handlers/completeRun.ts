import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { completeRun } from '../runtime/storage/repositories/runsRepository';

export default defineHandler('completeRun', async ({ db, principal, path }) => {
  const run = await completeRun(db, principal.orgId, path.id);
  if (!run) throw notFound('run', path.id);
  return { status: 200, body: run };
});
