import type { Knex } from 'knex';
import { openDatabase, selectRows } from '../runtime/storage/database';
import { inWriteTransaction } from '../runtime/storage/writeTransaction';
import { testDatabases, TestDatabase, warnIfPostgresSkipped } from './support/databases';

// On Postgres the point reads outside a transaction (selectRows on the server's own handle) share
// one pipelined connection per handle (runtime/storage/sharedReads.ts). They must behave as reads
// on pooled connections did: each sees what was committed before it, a broken connection is
// replaced, and closing the handle closes it. SQLite reads on its one connection: nothing to share.

warnIfPostgresSkipped();

const postgres = testDatabases.find((kind) => kind.name === 'postgres');
const describeOnPostgres = postgres ? describe : describe.skip;
if (!postgres) console.info('shared reads: Postgres only (set TEST_DATABASE_URL).');

describeOnPostgres('shared point reads (postgres)', () => {
  let db: TestDatabase;
  let knex: Knex;
  const backend = async (handle: Knex) => Number((await selectRows<{ pid: number }>(handle, 'select pg_backend_pid() as pid', []))[0].pid);

  beforeAll(async () => {
    db = await postgres!.create();
    knex = db.knex;
    await knex.raw('create table shared_notes (id integer primary key, who text not null)');
  });
  afterAll(() => db.destroy());

  it('reads outside a transaction ride one connection, whatever their number in flight, and each answers its own row', async () => {
    await knex('shared_notes').insert(Array.from({ length: 40 }, (_, i) => ({ id: i + 1, who: `n${i + 1}` })));
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      Promise.all([backend(knex), selectRows<{ who: string }>(knex, 'select who from shared_notes where id = ?', [i + 1])])));
    expect(new Set(answers.map(([pid]) => pid)).size).toBe(1);
    expect(answers.map(([, rows]) => rows[0].who)).toEqual(Array.from({ length: 40 }, (_, i) => `n${i + 1}`));
    // a transaction's reads are its own connection's
    const inside = await inWriteTransaction(knex, (trx) => backend(trx));
    expect(inside).not.toBe(answers[0][0]);
  });

  it('a read sees every write committed before it was sent, and never one still open', async () => {
    for (let i = 0; i < 20; i++) {
      const id = 1000 + i;
      await inWriteTransaction(knex, (trx) => trx('shared_notes').insert({ id, who: 'committed' }));
      expect(await selectRows(knex, 'select who from shared_notes where id = ?', [id])).toEqual([{ who: 'committed' }]);
    }
    const seen = await inWriteTransaction(knex, async (trx) => {
      await trx('shared_notes').insert({ id: 2000, who: 'open' });
      return selectRows(knex, 'select who from shared_notes where id = ?', [2000]);
    });
    expect(seen).toEqual([]);
  });

  it('a shared connection that was ended is replaced: reads answer again', async () => {
    const before = await backend(knex);
    const admin = openDatabase(db.url);
    try {
      await admin.knex.raw('select pg_terminate_backend(?)', [before]);
    } finally {
      await admin.close();
    }
    // the read in flight when the termination is noticed may fail (503 for a client); the
    // connection is dropped then, and the next read opens another
    let after: number | undefined;
    for (let attempt = 0; attempt < 3 && after === undefined; attempt++) after = await backend(knex).catch(() => undefined);
    expect(after).toEqual(expect.any(Number));
    expect(after).not.toBe(before);
  });

  it('closing the handle closes the shared connection', async () => {
    const other = db.openAnother();
    const pid = await backend(other.knex);
    expect(Number((await knex.raw('select count(*) as n from pg_stat_activity where pid = ?', [pid])).rows[0].n)).toBe(1);
    await other.close();
    // the backend ends once its client said goodbye: poll Postgres for it
    let alive = 1;
    for (let i = 0; i < 50 && alive > 0; i++) {
      alive = Number((await knex.raw('select count(*) as n from pg_stat_activity where pid = ?', [pid])).rows[0].n);
      if (alive > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(alive).toBe(0);
  });
});
