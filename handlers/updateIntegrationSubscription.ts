import { defineHandler } from '../runtime/http/handler';
import { setSubscriptionStatus } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('updateIntegrationSubscription', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await setSubscriptionStatus(db, principal.orgId, path.partner, path.id, body.status),
}));
