import { defineHandler } from '../runtime/http/handler';
import { checkSubscriptionTarget, createSubscription } from '../runtime/domain/webhookSubscriptions';

export default defineHandler(
  'createIntegrationSubscription',
  {
    // the target's DNS lookup, before the write's transaction begins
    prepare: ({ path, body, config }) =>
      checkSubscriptionTarget(path.partner, body, { allowPrivateTargets: config.webhookAllowPrivateTargets }),
  },
  async ({ db, principal, path, prepared }) => {
    const result = await createSubscription(db, principal.orgId, path.partner, prepared);
    if (!result.created) return { status: 200, body: result.subscription };
    const location = `/v1/integrations/${path.partner}/subscriptions/${result.subscription.id}`;
    return { status: 201, body: result.subscription, headers: { Location: location } };
  },
);
