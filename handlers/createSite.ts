import { defineHandler } from '../runtime/http/handler';
import { createSite } from '../runtime/domain/sites';

export default defineHandler('createSite', async ({ db, principal, body }) => {
  const site = await createSite(db, principal.orgId, body);
  return { status: 201, body: site, headers: { Location: `/v1/sites/${site.id}` } };
});
