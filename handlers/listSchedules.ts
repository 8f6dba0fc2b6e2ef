import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listSchedules } from '../runtime/storage/repositories/schedulesRepository';

export default defineHandler('listSchedules', async ({ db, principal, query }) => ({
  status: 200,
  body: await listSchedules(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
