import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listLogs } from '../runtime/storage/repositories/logsRepository';

export default defineHandler('listLogs', async ({ db, principal, query }) => ({
  status: 200,
  body: await listLogs(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
