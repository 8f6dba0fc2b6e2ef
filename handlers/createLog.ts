import { defineHandler } from '../runtime/http/handler';
import { createLog } from '../runtime/domain/logs';

export default defineHandler('createLog', async ({ db, principal, body }) => {
  const log = await createLog(db, principal.orgId, body);
  return { status: 201, body: log, headers: { Location: `/v1/logs/${log.id}` } };
});
