import { defineHandler, pageOf } from '../runtime/http/handler';
import { listIssues } from '../runtime/storage/repositories/issuesRepository';

export default defineHandler('listIssues', async ({ db, principal, query }) => ({
  status: 200,
  body: await listIssues(
    db,
    principal.orgId,
    {
      status: query.status,
      priority: query.priority,
      siteId: query.siteId,
      assetId: query.assetId,
      runId: query.runId,
      assigneeUserId: query.assigneeUserId,
    },
    pageOf(query),
  ),
}));
