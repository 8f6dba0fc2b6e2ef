import { defineHandler } from '../runtime/http/handler';
import { updateRun } from '../runtime/domain/runs';

export default defineHandler('updateRun', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateRun(db, principal.orgId, path.id, body),
}));
