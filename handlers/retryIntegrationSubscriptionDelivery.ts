import { defineHandler } from '../runtime/http/handler';
import { retryDelivery } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('retryIntegrationSubscriptionDelivery', async ({ db, principal, path }) => ({
  status: 202,
  body: await retryDelivery(db, principal.orgId, path.partner, path.id, path.deliveryId),
}));
