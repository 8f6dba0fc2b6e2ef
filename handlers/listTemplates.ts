import { defineHandler, pageOf } from '../runtime/http/handler';
import { listTemplates } from '../runtime/storage/repositories/templatesRepository';

export default defineHandler('listTemplates', async ({ db, principal, query }) => ({
  status: 200,
  body: await listTemplates(db, principal.orgId, pageOf(query)),
}));
