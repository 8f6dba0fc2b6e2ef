import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findSite } from '../runtime/storage/repositories/sitesRepository';

export default defineHandler('getSite', async ({ db, principal, path }) => {
  const site = await findSite(db, principal.orgId, path.id);
  if (!site) throw notFound('site', path.id);
  return { status: 200, body: site };
});
