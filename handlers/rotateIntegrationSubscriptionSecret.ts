import { defineHandler } from '../runtime/http/handler';
import { rotateSubscriptionSecret } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('rotateIntegrationSubscriptionSecret', async ({ db, principal, path }) => ({
  status: 200,
  body: await rotateSubscriptionSecret(db, principal.orgId, path.partner, path.id),
}));
