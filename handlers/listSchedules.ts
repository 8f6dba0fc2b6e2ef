import { defineHandler, pageOf } from '../runtime/http/handler';
import { listSchedules } from '../runtime/storage/repositories/schedulesRepository';

export default defineHandler('listSchedules', async ({ db, principal, query }) => ({
  status: 200,
  body: await listSchedules(
    db,
    principal.orgId,
    { siteId: query.siteId, assigneeUserId: query.assigneeUserId, templateId: query.templateId },
    pageOf(query),
  ),
}));
