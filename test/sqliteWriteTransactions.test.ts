import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { openDatabase, Database } from '../runtime/storage/database';
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

