import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase, Database } from '../runtime/storage/database';
import BetterSqlite3 from 'better-sqlite3';
import { AUTOCHECKPOINT_PAGES, startCheckpointer } from '../runtime/storage/sqliteCheckpoints';

// SQLite checkpoints run on a thread of each server process (runtime/storage/sqliteCheckpoints.ts):
// committed pages reach the database file without any commit checkpointing itself, well below
// the request connection's own bound, and a stopped thread copies nothing more.

const ROW_BYTES = 1000;
const ROWS = 2000; // ~2 MB in ~500 WAL pages: far below AUTOCHECKPOINT_PAGES

let dir: string;
let file: string;
let db: Database | undefined;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-checkpoints-'));
  file = path.join(dir, 'test.sqlite');
});

afterEach(async () => {
  await db?.close();
  db = undefined;
  fs.rmSync(dir, { recursive: true, force: true });
});

async function waitFor(check: () => boolean, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return check();
}

test('committed pages are copied into the database file by the checkpoint thread, below the commit-time bound', async () => {
  expect(ROWS * ROW_BYTES / 4096).toBeLessThan(AUTOCHECKPOINT_PAGES / 4);
  db = openDatabase(`sqlite://${file}`);
  await db!.knex.raw('create table filler (id integer primary key, body text not null)');
  const before = fs.statSync(file).size;
  for (let i = 0; i < ROWS; i += 100) {
    // one commit per 100 rows, each through the request connection as a server write would
    await db!.knex.transaction((trx) => trx('filler').insert(Array.from({ length: 100 }, (_, j) => ({ id: i + j, body: 'x'.repeat(ROW_BYTES) }))));
  }
  // the commits went to the WAL; the thread copies them into the file within a few of its ticks
  const copied = await waitFor(() => fs.statSync(file).size >= before + ROWS * ROW_BYTES, 3000);
  expect({ copied, fileBytes: fs.statSync(file).size }).toEqual({ copied: true, fileBytes: expect.any(Number) });
  const [{ n }] = await db!.knex('filler').count({ n: '*' });
  expect(Number(n)).toBe(ROWS);
});

test('the request connection bounds the WAL itself at AUTOCHECKPOINT_PAGES', async () => {
  db = openDatabase(`sqlite://${file}`);
  const rows = await db!.knex.raw('pragma wal_autocheckpoint');
  expect(rows).toEqual([{ wal_autocheckpoint: AUTOCHECKPOINT_PAGES }]);
});

test('a stopped checkpoint thread is gone: stop() resolves on its exit, and nothing is copied afterwards', async () => {
  const writer = new BetterSqlite3(file);
  writer.pragma('journal_mode = WAL');
  writer.pragma('wal_autocheckpoint = 0'); // only the thread could copy
  writer.exec('create table filler (id integer primary key, body text not null)');
  const checkpointer = startCheckpointer(file, 20);
  writer.prepare('insert into filler (body) values (?)').run('x'.repeat(ROW_BYTES));
  expect(await waitFor(() => fs.statSync(file).size > 4096, 3000)).toBe(true); // it was running
  await checkpointer.stop();
  const stoppedAt = fs.statSync(file).size;
  const insert = writer.prepare('insert into filler (body) values (?)');
  writer.transaction(() => { for (let i = 0; i < ROWS; i++) insert.run('x'.repeat(ROW_BYTES)); })();
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(fs.statSync(file).size).toBe(stoppedAt);
  writer.close();
});
