import { defineHandler } from '../runtime/http/handler';
import { deleteTemplate } from '../runtime/domain/templates';

export default defineHandler('deleteTemplate', async ({ db, principal, path }) => {
  await deleteTemplate(db, principal.orgId, path.id);
  return { status: 204 };
});
