import { defineHandler } from '../runtime/http/handler';
import { getSubscriptionDelivery } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('getIntegrationSubscriptionDelivery', async ({ db, principal, path }) => ({
  status: 200,
  body: await getSubscriptionDelivery(db, principal.orgId, path.partner, path.id, path.deliveryId),
}));
