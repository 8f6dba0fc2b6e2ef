import { defineHandler } from '../runtime/http/handler';
import { updateTemplate } from '../runtime/domain/templates';

export default defineHandler('updateTemplate', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateTemplate(db, principal.orgId, path.id, body),
}));
