import { defineHandler } from '../runtime/http/handler';
import { getSubscription } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('getIntegrationSubscription', async ({ db, principal, path }) => ({
  status: 200,
  body: await getSubscription(db, principal.orgId, path.partner, path.id),
}));
