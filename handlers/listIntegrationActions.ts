import { defineHandler, pageOf } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { partnerActions } from '../runtime/domain/integrationCatalog';

export default defineHandler('listIntegrationActions', async ({ path, query }) => {
  const page = partnerActions(path.partner, pageOf(query));
  if (!page) throw notFound(`No integration partner named ${path.partner}`);
  return { status: 200, body: page };
});
