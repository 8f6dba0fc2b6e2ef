import { defineHandler } from '../runtime/http/handler';
import { assertTimeZone } from '../runtime/domain/timeZones';
import { createSite } from '../runtime/storage/repositories/sitesRepository';

export default defineHandler('createSite', async ({ db, principal, body }) => {
  if (body.timezone !== undefined) assertTimeZone(body.timezone, '/timezone');
  const site = await createSite(db, principal.orgId, body);
  return { status: 201, body: site, headers: { Location: `/v1/sites/${site.id}` } };
});
