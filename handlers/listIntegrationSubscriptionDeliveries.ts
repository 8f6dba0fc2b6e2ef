import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listSubscriptionDeliveries } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('listIntegrationSubscriptionDeliveries', async ({ db, principal, path, query }) => ({
  status: 200,
  body: await listSubscriptionDeliveries(db, principal.orgId, path.partner, path.id, filtersOf(query), pageOf(query)),
}));
