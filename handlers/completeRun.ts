import { defineHandler } from '../runtime/http/handler';
import { completeRun } from '../runtime/domain/runs';

export default defineHandler('completeRun', async ({ db, principal, path }) => ({
  status: 200,
  body: await completeRun(db, principal.orgId, path.id),
}));
