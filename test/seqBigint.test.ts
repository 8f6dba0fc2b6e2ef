import { describeEachDatabase } from './support/testApp';
import { testDatabases, TestDatabase } from './support/databases';
import { SEQ_TABLES } from '../runtime/storage/migrations/0010_seq_bigint';
import { parseInt8 } from '../runtime/storage/database';
import { migrateLatest } from '../runtime/storage/migrate';

// Every listed table's `seq` is a 64-bit integer on both databases (SQLite's integers always
// are; on Postgres migration 0010 widened them), so a busy platform's sensor readings, events and
// deliveries never run out of numbers. Past 2^31 the API still answers `sequence` as a JSON
// number, and cursors keep paging.

const BEYOND_32_BITS = 3_000_000_000;
const checkinId = 'chk_8f3k2m9q4t7w1x5z6c0v2b8n';

describeEachDatabase('seq beyond 32 bits', (t) => {
  it('every table with a seq has it 64-bit (on Postgres its sequence too), and counts read as numbers', async () => {
    const k = t.db.knex;
    const columns: { table_name: string; data_type: string }[] = t.kind === 'postgres'
      ? await k('information_schema.columns').where({ table_schema: k.raw('current_schema()'), column_name: 'seq' }).select('table_name', 'data_type')
      : await k.raw(`select m.name as table_name, lower(p.type) as data_type from sqlite_master m join pragma_table_info(m.name) p
          where m.type = 'table' and p.name = 'seq' and p.pk = 1`); // SQLite: an INTEGER PRIMARY KEY is the 64-bit rowid
    // every table migration 0010 widened, and any made since
    expect(columns.map((c) => c.table_name)).toEqual(expect.arrayContaining([...SEQ_TABLES]));
    expect(columns.filter((c) => c.data_type !== (t.kind === 'postgres' ? 'bigint' : 'integer'))).toEqual([]);
    if (t.kind !== 'postgres') return;
    // the sequences behind them (Knex's own bookkeeping tables aside)
    const sequences: { sequence_name: string; data_type: string }[] = await k('information_schema.sequences')
      .where({ sequence_schema: k.raw('current_schema()') }).whereNot('sequence_name', 'like', 'knex\\_%').select('sequence_name', 'data_type');
    expect(sequences.map((s) => s.sequence_name)).toEqual(expect.arrayContaining(SEQ_TABLES.map((table) => `${table}_seq_seq`)));
    expect(sequences.filter((s) => s.data_type !== 'bigint')).toEqual([]);
    const [{ n }] = await k('events').count({ n: '*' }); // count(*) is bigint on Postgres
    expect(typeof n).toBe('number');
  });

  it('stores logs and events numbered past 2^31, answers their sequence as a number, and pages on', async () => {
    const k = t.db.knex;
    // the next log and event get numbers above 3 000 000 000
    if (t.kind === 'postgres') {
      for (const table of ['logs', 'events']) await k.raw('select setval(pg_get_serial_sequence(?, ?), ?)', [table, 'seq', BEYOND_32_BITS]);
    } else {
      for (const table of ['logs', 'events']) {
        await k('sqlite_sequence').where({ name: table }).delete();
        await k('sqlite_sequence').insert({ name: table, seq: BEYOND_32_BITS });
      }
    }
    const firstBefore = (await t.http.get('/v1/events?limit=100').set('Authorization', t.auth).expect(200)).body;
    const created: string[] = [];
    for (const message of ['first past 2^31', 'second past 2^31']) {
      const res = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId: checkinId, message }).expect(201);
      created.push(res.body.id);
    }
    const logRows = await k('logs').whereIn('id', created).orderBy('seq').select('seq');
    expect(logRows.map((r: { seq: unknown }) => r.seq)).toEqual([BEYOND_32_BITS + 1, BEYOND_32_BITS + 2]);

    // the log list pages by seq: one per page, the cursor carries a number past 2^31
    const page1 = (await t.http.get(`/v1/logs?entityType=checkin&entityId=${checkinId}&limit=1`).set('Authorization', t.auth).expect(200)).body;
    expect(page1.data.map((l: { id: string }) => l.id)).toEqual([created[0]]);
    const page2 = (await t.http.get(`/v1/logs?entityType=checkin&entityId=${checkinId}&limit=1&cursor=${page1.nextCursor}`).set('Authorization', t.auth).expect(200)).body;
    expect(page2.data.map((l: { id: string }) => l.id)).toEqual([created[1]]);

    // the change feed: sequence as a JSON number, and a walk from before them returns both in order
    const feed1 = (await t.http.get(`/v1/events?types=log.created&limit=1&after=${firstBefore.nextCursor}`).set('Authorization', t.auth).expect(200)).body;
    expect(feed1.data).toEqual([expect.objectContaining({ type: 'log.created', sequence: BEYOND_32_BITS + 1, data: expect.objectContaining({ id: created[0] }) })]);
    const feed2 = (await t.http.get(`/v1/events?types=log.created&limit=1&after=${feed1.nextCursor}`).set('Authorization', t.auth).expect(200)).body;
    expect(feed2.data).toEqual([expect.objectContaining({ sequence: BEYOND_32_BITS + 2, data: expect.objectContaining({ id: created[1] }) })]);
    const one = (await t.http.get(`/v1/events/${feed2.data[0].id}`).set('Authorization', t.auth).expect(200)).body;
    expect(one.sequence).toBe(BEYOND_32_BITS + 2);
  });
});

// An existing Postgres database made before migration 0010: its 32-bit columns and sequences are
// put back, rows written and the sequence set near its old end; then the migration runs.
for (const kind of testDatabases.filter((k) => k.name === 'postgres')) {
  describe(`migration 0010 widens an existing database [${kind.name}]`, () => {
    let db: TestDatabase;
    beforeAll(async () => { db = await kind.create(); });
    afterAll(async () => { await db?.destroy(); });

    it('keeps the rows and their numbers, and numbering goes on past 2^31', async () => {
      const k = db.knex;
      for (const table of SEQ_TABLES) {
        await k.raw('alter table ?? alter column seq type integer', [table]);
        const { rows } = await k.raw('select pg_get_serial_sequence(?, ?) as name', [table, 'seq']);
        await k.raw(`alter sequence ${rows[0].name} as integer`);
      }
      await k('knex_migrations').where('name', 'like', '0010_%').delete();
      const now = '2026-11-24T08:00:00.000Z';
      await k('organizations').insert({ id: 'org_old', name: 'old', created_at: now });
      const log = (id: string) => ({ id, org_id: 'org_old', entity_type: 'checkin', entity_id: 'chk_x', entry_type: 'comment', message: id, source: 'api', created_at: now });
      await k('logs').insert(log('log_old1'));
      await k.raw("select setval(pg_get_serial_sequence('logs', 'seq'), 2147483646)");
      await k('logs').insert(log('log_old2'));
      // the old sequence is at its end: the next insert would fail
      await expect(k('logs').insert(log('log_refused'))).rejects.toThrow(/reached maximum value/);

      expect(await migrateLatest(k)).toEqual([expect.stringMatching(/^0010_/)]);
      await k('logs').insert(log('log_new'));
      const rows = await k('logs').where({ org_id: 'org_old' }).orderBy('seq').select('id', 'seq');
      expect(rows).toEqual([
        { id: 'log_old1', seq: 1 },
        { id: 'log_old2', seq: 2147483647 },
        { id: 'log_new', seq: 2147483648 },
      ]);
    });
  });
}

describe('parseInt8', () => {
  it('reads 64-bit integers exactly up to 2^53 and refuses what a JSON number cannot hold', () => {
    expect(parseInt8('3000000001')).toBe(3_000_000_001);
    expect(parseInt8(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => parseInt8('9007199254740993')).toThrow(RangeError);
  });
});
