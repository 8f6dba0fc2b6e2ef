import type { Knex } from 'knex';
import { onSqliteConnection, runStatement, sendInTransaction } from '../runtime/storage/database';
import { dialectOf } from '../runtime/storage/databaseErrors';
import { beginWriteTransaction, inWriteTransaction } from '../runtime/storage/writeTransaction';
import { testDatabases, TestDatabase, warnIfPostgresSkipped } from './support/databases';
import { itOn } from './support/testApp';

// The server's write transactions are opened, committed and rolled back through the driver, and
// the work gets a Knex instance lent the transaction's connection (runtime/storage/writeTransaction.ts).
// What Knex's own transactions guaranteed must hold on both databases.

warnIfPostgresSkipped();

describe.each(testDatabases)('write transactions ($name)', (kind) => {
  let db: TestDatabase;
  let knex: Knex;
  const count = async (who: string) => Number((await knex('notes').whereLike('who', who).count({ n: '*' }))[0].n);

  beforeAll(async () => {
    db = await kind.create();
    knex = db.knex;
    await knex.raw('create table notes (id integer primary key, who text not null)');
    await knex.raw('create table parents (id integer primary key)');
    await knex.raw('create table children (id integer primary key, parent_id integer references parents (id) deferrable initially deferred)');
  });
  afterAll(() => db.destroy());

  let nextId = 1;
  const note = (who: string) => ({ id: nextId++, who });

  it('commits every statement of the work, through the builder and the driver-level helpers, on a Knex of the same dialect', async () => {
    const answer = await inWriteTransaction(knex, async (trx) => {
      expect(dialectOf(trx)).toBe(db.dialect);
      await trx('notes').insert(note('kept (builder)'));
      await runStatement(trx, 'insert into notes (id, who) values (?, ?)', [nextId++, 'kept (driver)']);
      return 'the answer';
    });
    expect(answer).toBe('the answer');
    expect(await count('kept%')).toBe(2);
  });

  it('rolls back every statement when the work throws, throws the error on, and the next transaction works', async () => {
    const failure = new Error('the operation failed');
    await expect(
      inWriteTransaction(knex, async (trx) => {
        await trx('notes').insert(note('rolled back (builder)'));
        await runStatement(trx, 'insert into notes (id, who) values (?, ?)', [nextId++, 'rolled back (driver)']);
        expect(Number((await trx('notes').whereLike('who', 'rolled back%').count({ n: '*' }))[0].n)).toBe(2);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await count('rolled back%')).toBe(0);
    await inWriteTransaction(knex, (trx) => trx('notes').insert(note('after the rollback')));
    expect(await count('after the rollback')).toBe(1);
  });

  it('refuses a statement through a transaction that has ended, and writes nothing', async () => {
    let kept: Knex | undefined;
    await inWriteTransaction(knex, async (trx) => {
      kept = trx;
    });
    await expect(kept!('notes').insert(note('too late (builder)'))).rejects.toThrow(/write transaction has ended/);
    await expect(runStatement(kept!, 'insert into notes (id, who) values (?, ?)', [nextId++, 'too late (driver)'])).rejects.toThrow(/write transaction has ended/);
    expect(await count('too late%')).toBe(0);
  });

  it('refuses a statement through an ended transaction also while another transaction is open on the same connection, and after a rollback', async () => {
    let committed: Knex | undefined;
    let rolledBack: Knex | undefined;
    await inWriteTransaction(knex, async (trx) => {
      committed = trx;
    });
    await expect(
      inWriteTransaction(knex, async (trx) => {
        rolledBack = trx;
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    const open = await beginWriteTransaction(knex);
    await open.knex('notes').insert(note('the open one'));
    await expect(committed!('notes').insert(note('stale (after commit)'))).rejects.toThrow(/write transaction has ended/);
    await expect(rolledBack!('notes').insert(note('stale (after rollback)'))).rejects.toThrow(/write transaction has ended/);
    await expect(runStatement(committed!, 'insert into notes (id, who) values (?, ?)', [nextId++, 'stale (driver)'])).rejects.toThrow(/write transaction has ended/);
    await open.commit();
    expect(await count('stale%')).toBe(0);
    expect(await count('the open one')).toBe(1);
  });

  itOn({ kind: kind.name }, 'sqlite')('runs the grouped statements of a write (onSqliteConnection) in its transaction: kept with the commit, undone with the rollback, refused after it ended', async () => {
    const insert = (trx: Knex, who: string) => onSqliteConnection(trx, (conn) => conn.prepare('insert into notes (id, who) values (?, ?)').run(nextId++, who).changes);
    await inWriteTransaction(knex, async (trx) => {
      expect(await insert(trx, 'grouped, kept')).toBe(1);
      expect(Number((await trx('notes').where({ who: 'grouped, kept' }).count({ n: '*' }))[0].n)).toBe(1);
    });
    await expect(
      inWriteTransaction(knex, async (trx) => {
        await insert(trx, 'grouped, rolled back');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    let ended: Knex | undefined;
    await inWriteTransaction(knex, async (trx) => {
      ended = trx;
    });
    await expect(insert(ended!, 'grouped, too late')).rejects.toThrow(/write transaction has ended/);
    expect(await count('grouped, kept')).toBe(1);
    expect(await count('grouped, %')).toBe(1);
  });

  it('does not nest: beginning a transaction on a transaction\'s instance throws, and the outer one is unharmed', async () => {
    await inWriteTransaction(knex, async (trx) => {
      await trx('notes').insert(note('outer'));
      await expect(inWriteTransaction(trx, (inner) => inner('notes').insert(note('inner')))).rejects.toThrow(/do not nest/);
      await trx('notes').insert(note('outer, after'));
    });
    expect(await count('outer%')).toBe(2);
    expect(await count('inner')).toBe(0);
  });

  // the instance is made on first use of anything but the driver-level helpers (lendTo): the
  // same rules hold before and after that moment
  it('holds the same rules when the work starts with the driver-level helpers and reaches the builder later', async () => {
    let kept: Knex | undefined;
    await inWriteTransaction(knex, async (trx) => {
      kept = trx;
      await expect(inWriteTransaction(trx, (inner) => inner('notes').insert(note('inner, first')))).rejects.toThrow(/do not nest/);
      await runStatement(trx, 'insert into notes (id, who) values (?, ?)', [nextId++, 'lazy (driver)']);
      expect(dialectOf(trx)).toBe(db.dialect);
      await trx('notes').insert(note('lazy (builder)'));
      expect(Number((await trx('notes').whereLike('who', 'lazy%').count({ n: '*' }))[0].n)).toBe(2);
      await runStatement(trx, 'insert into notes (id, who) values (?, ?)', [nextId++, 'lazy (driver, after)']);
    });
    expect(await count('lazy%')).toBe(3);
    await expect(runStatement(kept!, 'insert into notes (id, who) values (?, ?)', [nextId++, 'lazy (late)'])).rejects.toThrow(/write transaction has ended/);
    await expect(kept!.raw('select 1')).rejects.toThrow(/write transaction has ended/);
    expect(await count('lazy (late)')).toBe(0);
  });

  it('refuses a nested begin also through the clients Knex derives from the instance (trx.transaction, withUserParams)', async () => {
    let derived: Knex | undefined;
    await expect(
      inWriteTransaction(knex, async (trx) => {
        await trx('notes').insert(note('derived: outer'));
        await expect(trx.transaction(async (t2) => inWriteTransaction(t2, (inner) => inner('notes').insert(note('derived: inner'))))).rejects.toThrow(/do not nest/);
        derived = trx.withUserParams({ purpose: 'test' });
        await expect(inWriteTransaction(derived, (inner) => inner('notes').insert(note('derived: inner')))).rejects.toThrow(/do not nest/);
        throw new Error('the outer rolls back');
      }),
    ).rejects.toThrow('the outer rolls back');
    // the derived instance shares the transaction's loan: refused once it ended
    await expect(derived!('notes').insert(note('derived: late'))).rejects.toThrow(/write transaction has ended/);
    expect(await count('derived%')).toBe(0);
  });

  it('gives every connection back to the pool: after a commit, a rollback and a failed COMMIT', async () => {
    const pool = (knex.client as unknown as { pool: { numUsed(): number } }).pool;
    await inWriteTransaction(knex, (trx) => trx('notes').insert(note('pool: committed')));
    expect(pool.numUsed()).toBe(0);
    await expect(inWriteTransaction(knex, async () => Promise.reject(new Error('no')))).rejects.toThrow('no');
    expect(pool.numUsed()).toBe(0);
    await expect(inWriteTransaction(knex, (trx) => trx('children').insert({ id: 999, parent_id: 999 }))).rejects.toBeDefined();
    expect(pool.numUsed()).toBe(0);
  });

  it('a rollback while the COMMIT runs does nothing: the connection is given back once, so two later transactions never share it', async () => {
    const pool = (knex.client as unknown as { pool: { numUsed(): number } }).pool;
    const first = await beginWriteTransaction(knex);
    await first.knex('notes').insert(note('first'));
    const ending = Promise.all([first.commit(), first.rollback()]);
    // on SQLite (one connection) these two wait for it in turn; given back twice, the second
    // would get it while the first of them is still open, and its BEGIN would fail
    // (each does its work as soon as it has begun: one that holds a transaction open while it
    // waits for another's commit could wait for ever on SQLite, whose transactions commit in groups)
    const second = beginWriteTransaction(knex).then(async (t) => {
      await t.knex('notes').insert(note('second'));
      await new Promise((resolve) => setImmediate(resolve));
      await t.commit();
    });
    const third = beginWriteTransaction(knex).then(async (t) => {
      await t.knex('notes').insert(note('third'));
      await t.commit();
    });
    await ending;
    const [a, b] = await Promise.all([second, third]);
    expect([a, b]).toEqual([undefined, undefined]);
    expect(await count('first')).toBe(1);
    expect(await count('second')).toBe(1);
    expect(await count('third')).toBe(1);
    expect(pool.numUsed()).toBe(0);
  });

  it('an insert of an undefined value does inside a transaction what it does outside (DEFAULT on Postgres)', async () => {
    await knex.raw("create table tagged (id integer primary key, tag text not null default 'none')");
    const outcome = (p: Promise<unknown>) => p.then(() => 'stored', (err: { code?: string }) => err.code ?? 'error');
    const outside = await outcome(knex('tagged').insert({ id: 1, tag: undefined }));
    const inside = await outcome(inWriteTransaction(knex, (trx) => trx('tagged').insert({ id: 2, tag: undefined })));
    expect(inside).toBe(outside);
    expect(outside).toBe(db.dialect === 'postgres' ? 'stored' : 'SQLITE_CONSTRAINT_NOTNULL');
  });

  it('a COMMIT that fails (a deferred foreign key) throws its error, keeps nothing, and the connection serves the next transaction', async () => {
    await expect(inWriteTransaction(knex, (trx) => trx('children').insert({ id: 1, parent_id: 42 }))).rejects.toMatchObject({
      code: db.dialect === 'postgres' ? '23503' : 'SQLITE_CONSTRAINT_FOREIGNKEY',
    });
    expect(Number((await knex('children').count({ n: '*' }))[0].n)).toBe(0);
    await inWriteTransaction(knex, async (trx) => {
      await trx('parents').insert({ id: 42 });
      await trx('children').insert({ id: 1, parent_id: 42 });
    });
    expect(Number((await knex('children').count({ n: '*' }))[0].n)).toBe(1);
  });

  it('a statement sent without waiting that fails is thrown by the next statement that waits, or by the COMMIT, and nothing of the transaction is kept', async () => {
    // On Postgres sendInTransaction goes out without waiting for its answer
    // (runtime/storage/pgPipeline.ts); on SQLite it runs at once. Either way its failure ends the write.
    const insert = 'insert into notes (id, who) values (?, ?)';
    const taken = nextId++;
    await knex('notes').insert({ id: taken, who: 'taken' });
    const duplicate = db.dialect === 'postgres' ? { code: '23505' } : { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' };
    // a statement through the driver after it
    await expect(inWriteTransaction(knex, async (trx) => {
      await runStatement(trx, insert, [nextId++, 'sent (driver after)']);
      await sendInTransaction(trx, insert, [taken, 'sent (the duplicate)']);
      await runStatement(trx, insert, [nextId++, 'sent (driver after, 2)']);
    })).rejects.toMatchObject(duplicate);
    // only the COMMIT after it, with the failure mapped
    await expect(inWriteTransaction(knex, async (trx) => {
      await runStatement(trx, insert, [nextId++, 'sent (commit after)']);
      await sendInTransaction(trx, insert, [taken, 'sent (the duplicate)'], () => new Error('mapped: the row was taken'));
    })).rejects.toThrow('mapped: the row was taken');
    // a statement through Knex's builder after it: the failure thrown is the duplicate's own
    await expect(inWriteTransaction(knex, async (trx) => {
      await sendInTransaction(trx, insert, [taken, 'sent (the duplicate)']);
      await trx('notes').insert(note('sent (builder after)'));
    })).rejects.toMatchObject(duplicate);
    expect(await count('sent %')).toBe(0);
    // the connections serve the next transactions
    await Promise.all(Array.from({ length: 12 }, () => inWriteTransaction(knex, (trx) => sendInTransaction(trx, insert, [nextId++, 'sent (kept)']))));
    expect(await count('sent (kept)')).toBe(12);
  });

  it('a failed statement the work caught and went past: Postgres rolls the write back and its COMMIT throws; SQLite keeps the rest', async () => {
    // Postgres answers the COMMIT of an aborted transaction with ROLLBACK, not an error: a write
    // must never be reported committed then.
    const taken = nextId++;
    await knex('notes').insert({ id: taken, who: 'taken too' });
    const outcome = await inWriteTransaction(knex, async (trx) => {
      await trx('notes').insert(note('past a caught failure'));
      await trx('notes').insert({ id: taken, who: 'duplicate' }).catch(() => undefined);
    }).then(() => 'committed', (err: Error) => err.message);
    if (db.dialect === 'postgres') {
      expect(outcome).toMatch(/COMMIT rolled it back/);
      expect(await count('past a caught failure')).toBe(0);
    } else {
      expect(outcome).toBe('committed');
      expect(await count('past a caught failure')).toBe(1);
    }
  });

  it('an open transaction rolls back to a savepoint and keeps what came before it', async () => {
    const trx = await beginWriteTransaction(knex);
    await trx.knex('notes').insert(note('before the savepoint'));
    await trx.savepoint('test_point');
    await trx.knex('notes').insert(note('after the savepoint'));
    await trx.rollbackToSavepoint('test_point');
    await trx.commit();
    expect(trx.isOpen).toBe(false);
    expect(await count('before the savepoint')).toBe(1);
    expect(await count('after the savepoint')).toBe(0);
    await expect(trx.commit()).rejects.toThrow(/has ended/);
    await trx.rollback(); // a no-op once ended
  });

  it('concurrent transactions each see committed rows and their own, and all commit', async () => {
    const one = (i: number) =>
      inWriteTransaction(knex, async (trx) => {
        await trx('notes').insert(note(`concurrent ${i}`));
        await new Promise((resolve) => setImmediate(resolve)); // give the others every chance to interleave
        return Number((await trx('notes').where({ who: `concurrent ${i}` }).count({ n: '*' }))[0].n);
      });
    expect(await Promise.all(Array.from({ length: 10 }, (_, i) => one(i)))).toEqual(Array(10).fill(1));
    expect(await count('concurrent %')).toBe(10);
  });
});
