import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listCheckins } from '../runtime/storage/repositories/checkinsRepository';

export default defineHandler('listCheckins', async ({ db, principal, query }) => ({
  status: 200,
  body: await listCheckins(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
