import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { normalizeTemplateItems } from '../runtime/domain/runAnswers';
import { updateTemplate } from '../runtime/storage/repositories/templatesRepository';

export default defineHandler('updateTemplate', async ({ db, principal, path, body }) => {
  const items = body.items === undefined ? undefined : normalizeTemplateItems(body.items);
  const template = await updateTemplate(db, principal.orgId, path.id, { name: body.name, description: body.description, items });
  if (!template) throw notFound('template', path.id);
  return { status: 200, body: template };
});
