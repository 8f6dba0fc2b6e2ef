import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { isKnownPartner } from '../runtime/domain/integrationCatalog';
import { listWebhookSubscriptions } from '../runtime/storage/repositories/webhookSubscriptionsRepository';

export default defineHandler('listIntegrationSubscriptions', async ({ db, principal, path, query }) => {
  if (!isKnownPartner(path.partner)) throw notFound(`No integration partner named ${path.partner}`);
  return {
    status: 200,
    body: await listWebhookSubscriptions(
      db,
      principal.orgId,
      path.partner,
      filtersOf(query),
      pageOf(query),
    ),
  };
});
