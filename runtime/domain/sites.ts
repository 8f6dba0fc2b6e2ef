import { Knex } from 'knex';
import { notFound } from '../errors';
import { assertTimeZone } from './timeZones';
import { recordEvent, tombstone } from './events';
import * as sites from '../storage/repositories/sitesRepository';
import type { Site, SiteCreate, SiteUpdate } from '../storage/repositories/sitesRepository';

/** Every write of a site. `trx` is the request's transaction; each returns the site as GET shows it. */

export async function createSite(trx: Knex, orgId: string, body: SiteCreate): Promise<Site> {
  if (body.timezone !== undefined) assertTimeZone(body.timezone, '/timezone');
  return sites.insertSite(trx, orgId, body);
}

export async function updateSite(trx: Knex, orgId: string, id: string, changes: SiteUpdate): Promise<Site> {
  if (typeof changes.timezone === 'string') assertTimeZone(changes.timezone, '/timezone');
  const before = await sites.findSite(trx, orgId, id);
  if (!before || !(await sites.updateSite(trx, orgId, id, changes))) throw notFound('site', id);
  return (await sites.findSite(trx, orgId, id))!;
}

export async function deleteSite(trx: Knex, orgId: string, id: string): Promise<void> {
  if (!(await sites.deleteSite(trx, orgId, id))) throw notFound('site', id);
  await recordEvent(trx, orgId, { type: 'site.deleted', data: tombstone(id) });
}
