import { defineHandler } from '../runtime/http/handler';
import { createSubscription } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('createIntegrationSubscription', async ({ db, principal, path, body, config }) => {
  const result = await createSubscription(db, principal.orgId, path.partner, body, {
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    retentionDays: config.eventsRetentionDays,
  });
  if (!result.created) return { status: 200, body: result.subscription };
  const location = `/v1/integrations/${path.partner}/subscriptions/${result.subscription.id}`;
  return { status: 201, body: result.subscription, headers: { Location: location } };
});
