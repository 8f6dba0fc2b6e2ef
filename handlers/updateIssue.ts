import { defineHandler } from '../runtime/http/handler';
import { updateIssue } from '../runtime/domain/issues';

export default defineHandler('updateIssue', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateIssue(db, principal.orgId, path.id, body),
}));
