import { defineHandler } from '../runtime/http/handler';
import { replayEvents } from '../runtime/domain/webhookSubscriptions';

export default defineHandler('replayIntegrationSubscriptionEvents', async ({ db, principal, path, body, config }) => ({
  status: 202,
  body: await replayEvents(db, principal.orgId, path.partner, path.id, body, {
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    retentionDays: config.eventsRetentionDays,
  }),
}));
