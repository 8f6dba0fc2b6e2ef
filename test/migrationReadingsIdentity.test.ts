import knex, { Knex } from 'knex';
import { randomBytes } from 'node:crypto';
import { openDatabase, Database } from '../runtime/storage/database';
import { migrateUpTo } from '../runtime/storage/migrate';

// Migration 0012 replaces the sensor readings' identity index on a table that may hold millions
// of rows. On Postgres it promises (runtime/storage/migrations/0012_list_filter_indexes.ts) that
// the readings stay readable while the new indexes are built: a plain CREATE INDEX holds the
// table's writes (SHARE) but not its reads, where adding a unique constraint would take the
// table's exclusive lock for the whole build. Here a schema at 0011 gets enough readings for each
// build to take a while, the migration runs, and another connection reads the table meanwhile and
// watches the build's progress and the locks the migrating backend holds.

const postgresUrl = process.env.TEST_DATABASE_URL;
if (!postgresUrl) console.info('migration 0012 lock test skipped: it needs Postgres (set TEST_DATABASE_URL).');
const describePostgres = postgresUrl ? describe : describe.skip;

const READINGS = 200_000;

describePostgres('migration 0012 on Postgres: the readings stay readable while the identity index is rebuilt', () => {
  const schema = `t_${process.pid}_${randomBytes(4).toString('hex')}_m12`;
  let db: Database;
  let watcher: Knex;
  beforeAll(async () => {
    watcher = knex({ client: 'pg', connection: postgresUrl, pool: { min: 1, max: 1 } });
    await watcher.raw('create schema ??', [schema]);
    db = openDatabase(postgresUrl!, { schema });
    await migrateUpTo(db.knex, '0011_deliveries_due_by_subscription');
  });
  afterAll(async () => {
    await db?.close();
    await watcher?.raw('drop schema if exists ?? cascade', [schema]);
    await watcher?.destroy();
  });

  it('builds under SHARE, never the exclusive lock, reads answered during the build; the identity holds after', async () => {
    const k = db.knex;
    await k('organizations').insert({ id: 'org_m12', name: 'm12', created_at: '2026-01-01T00:00:00.000Z' });
    await k.raw(`insert into sensor_readings (id, org_id, provider, sensor_external_id, site_id, metric, value, unit, occurred_at, created_at)
      select 'srd_' || lpad(g::text, 24, '0'), 'org_m12', 'prov', 'sensor-' || (g % 500), 'site_1',
             case when g % 2 = 0 then 'temperature_c' else 'humidity_pct' end, g, 'C',
             to_char(timestamp '2026-01-01' + g * interval '1 millisecond', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '2026-01-01T00:00:00.000Z'
      from generate_series(1, ?) g`, [READINGS]);
    await k.raw('analyze sensor_readings');
    const table = `${schema}.sensor_readings`;

    let done = false;
    // 0012 alone: the later migrations are not what is watched
    const migrating = migrateUpTo(k, '0012_list_filter_indexes').finally(() => { done = true; });
    const modesDuringBuild = new Set<string>();
    let builds = 0;
    let readsDuringBuild = 0;
    try {
      while (!done) {
        const building = (await watcher.raw(
          `select p.pid, l.mode from pg_stat_progress_create_index p
             join pg_locks l on l.pid = p.pid and l.relation = p.relid and l.granted
            where p.relid = ?::regclass`, [table])).rows as { pid: number; mode: string }[];
        if (!building.length) continue;
        builds++;
        for (const row of building) modesDuringBuild.add(row.mode);
        // a read of the table, then: was the build still running when it was answered?
        const read = (await watcher.raw(`select count(*)::int as n from (select 1 from ${table} where org_id = 'org_m12' limit 10) r`)).rows[0].n;
        expect(read).toBe(10);
        const still = (await watcher.raw('select 1 from pg_stat_progress_create_index where pid = ? and relid = ?::regclass', [building[0].pid, table])).rows;
        if (still.length) readsDuringBuild++;
      }
    } finally {
      await migrating.catch(() => undefined); // a failed check above must not leave the migration running unawaited
    }
    await migrating;
    expect(await k('knex_migrations').where('name', 'like', '0012_%').pluck('name')).toEqual(['0012_list_filter_indexes']);

    expect(builds).toBeGreaterThan(0);
    expect([...modesDuringBuild]).not.toContain('AccessExclusiveLock');
    expect(modesDuringBuild).toContain('ShareLock');
    expect(readsDuringBuild).toBeGreaterThan(0);

    // after: every reading still there, the new identity refuses a duplicate, the old one is gone
    expect(Number((await k('sensor_readings').count({ n: '*' }))[0].n)).toBe(READINGS);
    const indexes = (await k.raw('select indexname from pg_indexes where schemaname = ? and tablename = ?', [schema, 'sensor_readings'])).rows.map((r: { indexname: string }) => r.indexname);
    expect(indexes).toEqual(expect.arrayContaining(['sensor_readings_identity', 'sensor_readings_provider_time', 'sensor_readings_metric_time']));
    expect(indexes).not.toContain('sensor_readings_dedup');
    const existing = await k('sensor_readings').where({ id: `srd_${'1'.padStart(24, '0')}` }).first();
    await expect(k('sensor_readings').insert({ ...existing, seq: undefined, id: 'srd_duplicate' })).rejects.toMatchObject({ code: '23505' });
  });
});
