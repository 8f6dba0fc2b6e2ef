import { defineHandler } from '../runtime/http/handler';
import { createTemplate } from '../runtime/domain/templates';

export default defineHandler('createTemplate', async ({ db, principal, body }) => {
  const template = await createTemplate(db, principal.orgId, body);
  return { status: 201, body: template, headers: { Location: `/v1/templates/${template.id}` } };
});
