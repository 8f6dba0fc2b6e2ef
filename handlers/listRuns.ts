import { defineHandler, pageOf } from '../runtime/http/handler';
import { listRuns } from '../runtime/storage/repositories/runsRepository';

export default defineHandler('listRuns', async ({ db, principal, query }) => ({
  status: 200,
  body: await listRuns(
    db,
    principal.orgId,
    { status: query.status, siteId: query.siteId, templateId: query.templateId, userId: query.userId },
    pageOf(query),
  ),
}));
