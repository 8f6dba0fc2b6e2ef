import { Knex } from 'knex';
import { notFound } from '../errors';
import { assertBothOrNeither } from './geofence';
import { storedTimeZone } from './timeZones';
import { finishUpdate, recordEvent, tombstone } from './events';
import * as sites from '../storage/repositories/sitesRepository';
import type { Site, SiteCreate, SiteUpdate } from '../storage/repositories/sitesRepository';

/**
 * Every write of a site. `trx` is the request's transaction; each returns the site as GET shows
 * it and records its event last (runtime/domain/events.ts).
 */

export async function createSite(trx: Knex, orgId: string, input: SiteCreate): Promise<Site> {
  const body = input.timezone === undefined ? input : { ...input, timezone: storedTimeZone(input.timezone, '/timezone') };
  const site = await sites.insertSite(trx, orgId, body);
  await recordEvent(trx, orgId, { type: 'site.created', data: site });
  return site;
}

/**
 * A site's location is both coordinates or neither. The contract makes a change name both
 * (`dependentRequired`); that one of them is null and the other not is refused here, as it is
 * for a user profile's last location.
 */
export async function updateSite(trx: Knex, orgId: string, id: string, input: SiteUpdate): Promise<Site> {
  const changes = typeof input.timezone === 'string' ? { ...input, timezone: storedTimeZone(input.timezone, '/timezone') } : input;
  const before = await sites.findSiteForUpdate(trx, orgId, id);
  if (!before) throw notFound('site', id);
  assertBothOrNeither(['latitude', changes.latitude], ['longitude', changes.longitude]);
  if (!(await sites.updateSite(trx, orgId, id, changes))) throw notFound('site', id);
  const after = (await sites.findSite(trx, orgId, id))!;
  return finishUpdate(trx, orgId, 'site.updated', before, after, (at) => sites.restoreSiteUpdatedAt(trx, orgId, id, at));
}

export async function deleteSite(trx: Knex, orgId: string, id: string): Promise<void> {
  // read with a lock first, as an update does: a write of the same site in the same Postgres
  // group commit is then told apart (storage/pgGroupCommit.ts, rowLockedBy)
  if (!(await sites.findSiteForUpdate(trx, orgId, id)) || !(await sites.deleteSite(trx, orgId, id))) throw notFound('site', id);
  await recordEvent(trx, orgId, { type: 'site.deleted', data: tombstone(id) });
}
