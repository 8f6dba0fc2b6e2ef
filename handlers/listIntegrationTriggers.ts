import { defineHandler, pageOf } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { partnerTriggers } from '../runtime/domain/integrationCatalog';

export default defineHandler('listIntegrationTriggers', async ({ path, query }) => {
  const page = partnerTriggers(path.partner, pageOf(query));
  if (!page) throw notFound(`No integration partner named ${path.partner}`);
  return { status: 200, body: page };
});
