import { migrateLatest } from '../runtime/storage/migrate';
import { testDatabases, TestDatabase, warnIfPostgresSkipped } from './support/databases';

// Subscriptions disabled before `disabled_at` existed get the time of their last change; the
// others none. The database is taken back to just before that migration (column dropped, the
// migration forgotten), rows are written as that schema had them, and the migration runs again.

warnIfPostgresSkipped();
for (const kind of testDatabases) {
  describe(`migration 0013 backfills webhook_subscriptions.disabled_at [${kind.name}]`, () => {
    let db: TestDatabase;
    beforeAll(async () => { db = await kind.create(); });
    afterAll(async () => { await db?.destroy(); });

    it('sets disabled_at to updated_at for disabled subscriptions only', async () => {
      const k = db.knex;
      await k.schema.alterTable('webhook_subscriptions', (t) => t.dropColumn('disabled_at'));
      await k('knex_migrations').where('name', 'like', '0013_%').delete();
      await k('organizations').insert({ id: 'org_old', name: 'old', created_at: '2026-11-20T08:00:00.000Z' });
      const subscription = (id: string, status: string, updatedAt: string) => ({
        id, org_id: 'org_old', partner: 'webhooks', trigger_key: 'site.created', match_key: 'site.created', target_url: `https://hooks.example.com/${id}`,
        status, secret: 'whsec_x', disabled_reason: status === 'disabled' ? 'gone' : null, created_at: '2026-11-20T08:00:00.000Z', updated_at: updatedAt,
      });
      await k('webhook_subscriptions').insert([
        subscription('whs_disabled', 'disabled', '2026-11-21T09:30:00.000Z'),
        subscription('whs_active', 'active', '2026-11-21T10:00:00.000Z'),
        subscription('whs_paused', 'paused', '2026-11-21T11:00:00.000Z'),
      ]);

      expect(await migrateLatest(k)).toEqual([expect.stringMatching(/^0013_/)]);
      const rows = await k('webhook_subscriptions').where({ org_id: 'org_old' }).orderBy('id').select('id', 'disabled_at');
      expect(rows).toEqual([
        { id: 'whs_active', disabled_at: null },
        { id: 'whs_disabled', disabled_at: '2026-11-21T09:30:00.000Z' },
        { id: 'whs_paused', disabled_at: null },
      ]);
    });
  });
}
