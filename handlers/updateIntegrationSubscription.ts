import { defineHandler } from '../runtime/http/handler';
import { checkSubscriptionTarget, updateSubscription } from '../runtime/domain/webhookSubscriptions';

export default defineHandler(
  'updateIntegrationSubscription',
  {
    // a new target's DNS lookup, before the write's transaction begins
    prepare: ({ path, body, config }) =>
      checkSubscriptionTarget(path.partner, body, { allowPrivateTargets: config.webhookAllowPrivateTargets }),
  },
  async ({ db, principal, path, prepared }) => ({
    status: 200,
    body: await updateSubscription(db, principal.orgId, path.partner, path.id, prepared),
  }),
);
