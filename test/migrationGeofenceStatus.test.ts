import { migrateLatest } from '../runtime/storage/migrate';
import { testDatabases, TestDatabase, warnIfPostgresSkipped } from './support/databases';

// Check-ins stored before `geofence_status` existed get the reason their stored fields and the
// sites imply. The database is taken back to just before that migration (column dropped, the
// migration forgotten), old-style rows are written, and the migration runs again.

warnIfPostgresSkipped();
for (const kind of testDatabases) {
  describe(`migration 0007 backfills geofence_status [${kind.name}]`, () => {
    let db: TestDatabase;
    beforeAll(async () => { db = await kind.create(); });
    afterAll(async () => { await db?.destroy(); });

    it('marks verdicts computed, rows without a position no_coordinates, and the rest by the site', async () => {
      const k = db.knex;
      await k.schema.alterTable('checkins', (t) => t.dropColumn('geofence_status'));
      await k('knex_migrations').where('name', 'like', '0007_%').delete();
      const now = '2026-11-22T08:00:00.000Z';
      await k('organizations').insert({ id: 'org_old', name: 'old', created_at: now });
      const site = (id: string, located: boolean) => ({
        id, org_id: 'org_old', name: id, latitude: located ? 53.8 : null, longitude: located ? -1.5 : null, geofence_radius_meters: 100, created_at: now, updated_at: now,
      });
      await k('sites').insert([site('site_located', true), site('site_bare', false)]);
      const checkin = (id: string, siteId: string, lat: number | null, distance: number | null) => ({
        id, org_id: 'org_old', user_id: 'u', site_id: siteId, status: 'active', latitude: lat, longitude: lat === null ? null : -1.5,
        distance_from_site_meters: distance, within_geofence: distance === null ? null : true, suspicious: distance === null ? null : false,
        suspicion_reasons: distance === null ? null : '[]', created_at: now, updated_at: now,
      });
      await k('checkins').insert([
        checkin('chk_verdict', 'site_located', 53.8, 12.5),
        checkin('chk_nopos', 'site_located', null, null),
        checkin('chk_unknown', 'site_nowhere', 53.8, null),
        checkin('chk_bare', 'site_bare', 53.8, null),
      ]);

      expect(await migrateLatest(k)).toEqual([expect.stringMatching(/^0007_/)]);
      const rows = await k('checkins').where({ org_id: 'org_old' }).orderBy('id').select('id', 'geofence_status');
      expect(rows).toEqual([
        { id: 'chk_bare', geofence_status: 'no_site_location' },
        { id: 'chk_nopos', geofence_status: 'no_coordinates' },
        { id: 'chk_unknown', geofence_status: 'site_not_found' },
        { id: 'chk_verdict', geofence_status: 'computed' },
      ]);
    });
  });
}
