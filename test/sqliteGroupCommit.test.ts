import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { openDatabase, Database } from '../runtime/storage/database';
import { inWriteTransaction } from '../runtime/storage/writeTransaction';
import { enterBatch, leaveBatch, MAX_BATCH } from '../runtime/storage/sqliteGroupCommit';
import { rejectionOf } from './support/databases';

// On SQLite the write transactions started while one is running share its database transaction
// and commit together, each in a savepoint of its own (runtime/storage/sqliteGroupCommit.ts).
// What must hold: a write transaction is answered only once its work is committed, a member that
// fails loses only its own work, and a COMMIT that fails fails every member and keeps nothing.
// "Committed" is checked from a second connection to the file, which sees committed data only
// (as another server process would).

let dir: string;
let file: string;
let db: Database;
let observer: BetterSqlite3.Database;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-group-commit-'));
  file = path.join(dir, 'test.sqlite');
  db = openDatabase(`sqlite://${file}`);
  await db.knex.raw('create table notes (id integer primary key, who text not null)');
  await db.knex.raw('create table parents (id integer primary key)');
  // checked at COMMIT, not at the insert: a real way to make a COMMIT fail
  await db.knex.raw('create table children (id integer primary key, parent_id integer not null references parents(id) deferrable initially deferred)');
  observer = new BetterSqlite3(file, { readonly: true });
});

afterEach(async () => {
  observer.close();
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** What another connection sees committed. */
const committedNotes = () => (observer.prepare('select who from notes order by id').all() as { who: string }[]).map((r) => r.who);

/** Starts `n` write transactions in the same turn of the event loop, each inserting one note. */
function writeNotes(names: string[], work?: (name: string) => void): Promise<string[]>[] {
  return names.map((who) =>
    inWriteTransaction(db.knex, async (trx) => {
      await trx('notes').insert({ who });
      work?.(who);
      return committedNotes(); // what another connection sees while this one's work is not committed
    }).then((seenInside) => {
      expect(seenInside).not.toContain(who);
      return committedNotes(); // … and once its commit has been answered
    }),
  );
}

test('write transactions started together commit together, and each is answered only once its work is committed', async () => {
  const names = ['a', 'b', 'c', 'd', 'e'];
  const seenWhenAnswered = await Promise.all(writeNotes(names));
  // one COMMIT for all five: whichever is answered first already finds all five committed
  for (const seen of seenWhenAnswered) expect(seen).toEqual(names);
});

test(`at most ${MAX_BATCH} write transactions commit together`, async () => {
  const names = Array.from({ length: MAX_BATCH * 2 + 3 }, (_, i) => `n${i}`);
  const seenWhenAnswered = await Promise.all(writeNotes(names));
  expect(seenWhenAnswered[0]).toEqual(names.slice(0, MAX_BATCH));
  expect(seenWhenAnswered[MAX_BATCH]).toEqual(names.slice(0, 2 * MAX_BATCH));
  expect(seenWhenAnswered[names.length - 1]).toEqual(names);
  expect(committedNotes()).toEqual(names);
});

test('a write transaction that fails rolls back its own work only; the others commit', async () => {
  const [a, b, c] = writeNotes(['a', 'b', 'c'], (who) => {
    if (who === 'b') throw new Error('b fails after its insert');
  });
  await expect(b).rejects.toThrow('b fails after its insert');
  expect(await a).toEqual(['a', 'c']);
  expect(await c).toEqual(['a', 'c']);
});

test('a COMMIT that fails fails every write transaction of the batch and keeps none of their work; the next one commits', async () => {
  const orphan = inWriteTransaction(db.knex, async (trx) => {
    await trx('children').insert({ parent_id: 999 }); // no such parent: refused at COMMIT
  });
  const [a, b] = writeNotes(['a', 'b']).map(rejectionOf);
  expect((await rejectionOf(orphan)).message).toMatch(/FOREIGN KEY constraint failed/);
  expect((await a).message).toMatch(/FOREIGN KEY constraint failed/);
  expect((await b).message).toMatch(/FOREIGN KEY constraint failed/);
  expect(committedNotes()).toEqual([]);
  expect(await db.knex('children').count({ n: '*' })).toEqual([{ n: 0 }]);

  const [c] = writeNotes(['c']);
  expect(await c).toEqual(['c']);
});

test('a connection closed while its batch waits for the COMMIT fails the batch\'s write transactions instead of leaving them waiting', async () => {
  // on a connection of its own, closed in the same turn as the work, before the commit at its end
  const conn = new BetterSqlite3(file);
  conn.pragma('busy_timeout = 5000');
  const pool = { acquireConnection: async () => conn, releaseConnection: async () => undefined };
  enterBatch(conn);
  conn.prepare("insert into notes (who) values ('a')").run();
  const answered = leaveBatch(pool, conn, true).then(() => 'committed', (err: Error) => err.message);
  conn.close(); // SQLite rolls the open transaction back
  expect(await answered).toMatch(/not open/);
  expect(committedNotes()).toEqual([]);
});

test('two connections of one process to the same file: a write on one while the other\'s batch waits for its commit commits both', async () => {
  const other = openDatabase(`sqlite://${file}`);
  try {
    // the first batch holds the write lock until its commit at the end of this turn; the second
    // connection begins in between (an immediate queued before that commit), and its BEGIN
    // IMMEDIATE would wait for the lock on this very thread, the one that is to commit it
    const second = new Promise<void>((resolve, reject) => {
      setImmediate(() => inWriteTransaction(other.knex, async (trx) => { await trx('notes').insert({ who: 'second' }); }).then(resolve, reject));
    });
    const [first] = writeNotes(['first']);
    await Promise.all([first, second]);
    expect(committedNotes()).toEqual(['first', 'second']);
  } finally {
    await other.close();
  }
});

test('two connections of one process to different files: a write that leaves while the other connection\'s batch waits for its commit is answered as committed', async () => {
  const otherFile = path.join(dir, 'other.sqlite');
  const other = openDatabase(`sqlite://${otherFile}`);
  try {
    await other.knex.raw('create table notes (id integer primary key, who text not null)');
    // the second connection's write is done and its batch waits for its commit when the first
    // write leaves: the statement that releases the first write's savepoint commits the other
    // batch first, and that COMMIT must not in turn commit the first batch under the savepoint
    let second: Promise<void> | undefined;
    const first = inWriteTransaction(db.knex, async (trx) => {
      await trx('notes').insert({ who: 'first' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      let secondDone!: () => void;
      const secondWorked = new Promise<void>((resolve) => { secondDone = resolve; });
      second = inWriteTransaction(other.knex, async (t) => {
        await t('notes').insert({ who: 'second' });
        secondDone();
      });
      await secondWorked;
      for (let i = 0; i < 20; i++) await null; // the second has left its savepoint by now
    });
    await first;
    await second;
    expect(committedNotes()).toEqual(['first']);
    expect(await other.knex('notes').pluck('who')).toEqual(['second']);
  } finally {
    await other.close();
  }
});
