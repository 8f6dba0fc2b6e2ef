import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { answerRun } from '../runtime/storage/repositories/runsRepository';

export default defineHandler('updateRun', async ({ db, principal, path, body }) => {
  const run = await answerRun(db, principal.orgId, path.id, body.answers);
  if (!run) throw notFound('run', path.id);
  return { status: 200, body: run };
});
