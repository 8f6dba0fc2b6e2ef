import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listAssets } from '../runtime/storage/repositories/assetsRepository';

export default defineHandler('listAssets', async ({ db, principal, query }) => ({
  status: 200,
  body: await listAssets(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
