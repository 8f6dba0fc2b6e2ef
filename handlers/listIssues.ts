import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listIssues } from '../runtime/storage/repositories/issuesRepository';

export default defineHandler('listIssues', async ({ db, principal, query }) => ({
  status: 200,
  body: await listIssues(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
