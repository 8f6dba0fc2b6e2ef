import { defineHandler } from '../runtime/http/handler';
import { createRun } from '../runtime/domain/runs';

export default defineHandler('createRun', async ({ db, principal, body }) => {
  const run = await createRun(db, principal.orgId, body);
  return { status: 201, body: run, headers: { Location: `/v1/runs/${run.id}` } };
});
