import { defineHandler, pageOf } from '../runtime/http/handler';
import { listSites } from '../runtime/storage/repositories/sitesRepository';

export default defineHandler('listSites', async ({ db, principal, query }) => ({
  status: 200,
  body: await listSites(db, principal.orgId, pageOf(query)),
}));
