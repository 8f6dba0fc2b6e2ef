import { defineHandler } from '../runtime/http/handler';
import { pingSubscription } from '../runtime/domain/webhookSubscriptions';

export default defineHandler(
  'pingIntegrationSubscription',
  {
    // the target's answer is waited for before the write's transaction begins, never inside it
    prepare: ({ reads, principal, path, config }) =>
      pingSubscription(reads, principal.orgId, path.partner, path.id, {
        timeoutSeconds: config.webhookTimeoutSeconds,
        allowPrivateTargets: config.webhookAllowPrivateTargets,
      }),
  },
  async ({ prepared }) => ({ status: 200, body: prepared }),
);
