import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { triggerSample } from '../runtime/domain/integrationCatalog';
import { toDeliveredEvent } from '../runtime/domain/events';
import { recentEventsOfType } from '../runtime/storage/repositories/eventsRepository';

export default defineHandler('listIntegrationTriggerSamples', async ({ db, principal, path }) => {
  const sample = triggerSample(path.partner, path.key);
  if (!sample) throw notFound(`No trigger ${path.key} for integration partner ${path.partner}`);
  const recent = await recentEventsOfType(db, principal.orgId, path.key, 3);
  return { status: 200, body: { data: recent.length ? recent.map(toDeliveredEvent) : [sample] } };
});
