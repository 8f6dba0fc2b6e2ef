import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { assertTimeZone } from '../runtime/domain/timeZones';
import { updateSite } from '../runtime/storage/repositories/sitesRepository';

export default defineHandler('updateSite', async ({ db, principal, path, body }) => {
  if (typeof body.timezone === 'string') assertTimeZone(body.timezone, '/timezone');
  const site = await updateSite(db, principal.orgId, path.id, body);
  if (!site) throw notFound('site', path.id);
  return { status: 200, body: site };
});
