import { defineHandler } from '../runtime/http/handler';
import { normalizeTemplateItems } from '../runtime/domain/runAnswers';
import { createTemplate } from '../runtime/storage/repositories/templatesRepository';

export default defineHandler('createTemplate', async ({ db, principal, body }) => {
  const items = normalizeTemplateItems(body.items);
  const template = await createTemplate(db, principal.orgId, { name: body.name, description: body.description ?? null, items });
  return { status: 201, body: template, headers: { Location: `/v1/templates/${template.id}` } };
});
