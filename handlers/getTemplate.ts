import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findTemplate } from '../runtime/storage/repositories/templatesRepository';

export default defineHandler('getTemplate', async ({ db, principal, path }) => {
  const template = await findTemplate(db, principal.orgId, path.id);
  if (!template) throw notFound('template', path.id);
  return { status: 200, body: template };
});
