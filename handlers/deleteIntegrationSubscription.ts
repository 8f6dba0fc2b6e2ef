import { defineHandler } from '../runtime/http/handler';
import { deleteSubscription } from '../runtime/domain/webhookSubscriptions';

// A retry with the same Idempotency-Key replays the 204; without it, the subscription is gone: 404.
export default defineHandler('deleteIntegrationSubscription', async ({ db, principal, path }) => {
  await deleteSubscription(db, principal.orgId, path.partner, path.id);
  return { status: 204 };
});
