import { Knex } from 'knex';

/**
 * A check-in stores why it has no geofence verdict (`geofence_status`, the contract's
 * `GeofenceStatus`), decided with the verdict. Rows written before this column existed get the
 * reason their stored fields and today's sites imply: a verdict means `computed`; no position
 * `no_coordinates`; otherwise the site as it is now (missing, or without a location). A site
 * created since, with a location, cannot say what it was then: those count as `site_not_found`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('checkins', (t) => {
    t.string('geofence_status', 20).notNullable().defaultTo('no_coordinates');
  });
  await knex('checkins').whereNotNull('distance_from_site_meters').update({ geofence_status: 'computed' });
  const withoutVerdict = () => knex('checkins').whereNull('distance_from_site_meters').whereNotNull('latitude').whereNotNull('longitude');
  const siteWithoutLocation = (q: Knex.QueryBuilder) => {
    q.select(knex.raw('1')).from('sites')
      .whereRaw('sites.org_id = checkins.org_id').andWhereRaw('sites.id = checkins.site_id')
      .andWhere((w) => w.whereNull('sites.latitude').orWhereNull('sites.longitude'));
  };
  await withoutVerdict().whereExists(siteWithoutLocation).update({ geofence_status: 'no_site_location' });
  await withoutVerdict().whereNotExists(siteWithoutLocation).update({ geofence_status: 'site_not_found' });
}
