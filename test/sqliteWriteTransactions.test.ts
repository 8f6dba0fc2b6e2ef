import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { openDatabase, Database, runStatement } from '../runtime/storage/database';
import type { Knex } from 'knex';
import { inWriteTransaction } from '../runtime/storage/writeTransaction';

// Every write transaction on SQLite begins IMMEDIATE (runtime/storage/writeTransaction.ts): it holds the
// write lock from its first statement, so a transaction that reads first and writes later is not
// refused (SQLITE_BUSY) when another process commits in between — the other process waits
// instead. With Knex's plain BEGIN the write below fails at once.

let dir: string;
let db: Database;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-write-tx-'));
  db = openDatabase(`sqlite://${path.join(dir, 'test.sqlite')}`);
  await db.knex.raw('create table notes (id integer primary key, who text not null)');
});

afterAll(async () => {
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Another process inserting one row, waiting up to 5 s for the write lock like the server does. */
function otherProcessWrites(file: string): Promise<number | null> {
  const script = `
    const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
    const db = new Database(${JSON.stringify(file)});
    db.pragma('busy_timeout = 5000');
    db.prepare("insert into notes (who) values ('other process')").run();
    db.close();`;
  const child = spawn(process.execPath, ['-e', script], { stdio: 'inherit' });
  return new Promise((resolve) => child.once('exit', resolve));
}

test('a transaction that reads, then writes after another process wanted to write, commits; the other process waits and commits after it', async () => {
  let other: Promise<number | null> | undefined;
  await inWriteTransaction(db.knex, async (trx) => {
    const before = await trx('notes').count({ n: '*' });
    expect(Number(before[0].n)).toBe(0);
    other = otherProcessWrites(path.join(dir, 'test.sqlite'));
    await new Promise((resolve) => setTimeout(resolve, 500)); // the other process is running its insert by now
    await trx('notes').insert({ who: 'this transaction' });
  });
  expect(await other).toBe(0);
  const rows = await db.knex('notes').orderBy('id').pluck('who');
  expect(rows).toEqual(['this transaction', 'other process']);
});

// On SQLite the transaction is opened and ended through the driver, and `work` gets a Knex
// instance lent the transaction's connection (runtime/storage/writeTransaction.ts). What Knex's
// own transactions guaranteed must still hold.

test('a transaction whose work throws rolls back every statement of it, through the builder and through the driver-level helpers, and throws the error on', async () => {
  const failure = new Error('the operation failed');
  await expect(
    inWriteTransaction(db.knex, async (trx) => {
      await trx('notes').insert({ who: 'rolled back (builder)' });
      await runStatement(trx, 'insert into notes (who) values (?)', ['rolled back (driver)']);
      expect(await trx('notes').whereLike('who', 'rolled back%').count({ n: '*' })).toEqual([{ n: 2 }]);
      throw failure;
    }),
  ).rejects.toBe(failure);
  expect(await db.knex('notes').whereLike('who', 'rolled back%').count({ n: '*' })).toEqual([{ n: 0 }]);
  // the connection is out of the transaction and back in the pool
  await inWriteTransaction(db.knex, (trx) => trx('notes').insert({ who: 'after the rollback' }));
  expect(await db.knex('notes').where({ who: 'after the rollback' }).count({ n: '*' })).toEqual([{ n: 1 }]);
});

test('a statement through a transaction that has ended is refused and writes nothing', async () => {
  let kept: Knex | undefined;
  await inWriteTransaction(db.knex, async (trx) => {
    kept = trx;
  });
  await expect(kept!('notes').insert({ who: 'too late (builder)' })).rejects.toThrow(/write transaction has ended/);
  await expect(runStatement(kept!, 'insert into notes (who) values (?)', ['too late (driver)'])).rejects.toThrow(/write transaction has ended/);
  expect(await db.knex('notes').whereLike('who', 'too late%').count({ n: '*' })).toEqual([{ n: 0 }]);
});

test('concurrent transactions of one process run one after the other, each seeing only committed rows and its own', async () => {
  const seen: number[] = [];
  const one = (who: string) =>
    inWriteTransaction(db.knex, async (trx) => {
      const [{ n }] = await trx('notes').where({ who }).count({ n: '*' });
      seen.push(Number(n));
      await new Promise((resolve) => setImmediate(resolve)); // give the others every chance to interleave
      await trx('notes').insert({ who });
    });
  await Promise.all(Array.from({ length: 10 }, () => one('concurrent')));
  expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

test('a COMMIT that fails (a deferred foreign key) throws its error, keeps nothing, and leaves the connection ready for the next transaction', async () => {
  await db.knex.raw('create table parents (id integer primary key)');
  await db.knex.raw('create table children (id integer primary key, parent_id integer references parents (id) deferrable initially deferred)');
  // SQLite checks a deferred foreign key at COMMIT, refuses it there and keeps the transaction open
  await expect(inWriteTransaction(db.knex, (trx) => trx('children').insert({ parent_id: 42 }))).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_FOREIGNKEY' });
  expect(await db.knex('children').count({ n: '*' })).toEqual([{ n: 0 }]);
  await inWriteTransaction(db.knex, async (trx) => {
    await trx('parents').insert({ id: 42 });
    await trx('children').insert({ parent_id: 42 });
  });
  expect(await db.knex('children').count({ n: '*' })).toEqual([{ n: 1 }]);
});
