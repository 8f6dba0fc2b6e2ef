import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { deleteTemplate } from '../runtime/storage/repositories/templatesRepository';

export default defineHandler('deleteTemplate', async ({ db, principal, path }) => {
  if (!(await deleteTemplate(db, principal.orgId, path.id))) throw notFound('template', path.id);
  return { status: 204 };
});
