import { defineHandler, pageOf } from '../runtime/http/handler';
import { getSubscription } from '../runtime/domain/webhookSubscriptions';
import { listDeliveries } from '../runtime/storage/repositories/webhookDeliveriesRepository';

export default defineHandler('listIntegrationSubscriptionDeliveries', async ({ db, principal, path, query }) => {
  await getSubscription(db, principal.orgId, path.partner, path.id); // 404 for an unknown partner or subscription
  return { status: 200, body: await listDeliveries(db, principal.orgId, path.id, { status: query.status }, pageOf(query)) };
});
