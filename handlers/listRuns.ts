import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listRuns } from '../runtime/storage/repositories/runsRepository';

export default defineHandler('listRuns', async ({ db, principal, query }) => ({
  status: 200,
  body: await listRuns(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
