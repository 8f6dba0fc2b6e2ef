import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import knex from 'knex';
import { Database, openDatabase } from '../../runtime/storage/database';
import { migrateLatest } from '../../runtime/storage/migrate';

/**
 * The databases every storage test runs on: SQLite always (a fresh file per test file) and
 * Postgres when TEST_DATABASE_URL is set (a fresh schema per test file, dropped afterwards).
 */
export interface TestDatabaseKind {
  name: 'sqlite' | 'postgres';
  /** Opens a fresh, migrated database; `url` and `schema` let a second app or process share it. */
  create(): Promise<TestDatabase>;
}

export interface TestDatabase extends Database {
  /** DATABASE_URL for another process on the same database. */
  url: string;
  schema?: string;
  /** Another connection pool on the same database (a second server process, in-process). */
  openAnother(): Database;
  destroy(): Promise<void>;
}

const postgresUrl = process.env.TEST_DATABASE_URL;

export const testDatabases: TestDatabaseKind[] = [
  { name: 'sqlite', create: createSqlite },
  ...(postgresUrl ? [{ name: 'postgres' as const, create: createPostgres }] : []),
];

let warned = false;
export function warnIfPostgresSkipped(): void {
  if (!postgresUrl && !warned) {
    warned = true;
    console.info('Postgres suites skipped: set TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test to run them too.');
  }
}

async function createSqlite(): Promise<TestDatabase> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-test-'));
  const url = `sqlite://${path.join(dir, 'test.sqlite')}`;
  const db = openDatabase(url);
  await migrateLatest(db.knex);
  return {
    ...db,
    url,
    openAnother: () => openDatabase(url),
    async destroy() {
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function createPostgres(): Promise<TestDatabase> {
  const schema = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = knex({ client: 'pg', connection: postgresUrl, pool: { min: 0, max: 1 } });
  await admin.raw('create schema ??', [schema]);
  await admin.destroy();
  const db = openDatabase(postgresUrl!, { schema });
  await migrateLatest(db.knex);
  const url = withSearchPath(postgresUrl!, schema);
  return {
    ...db,
    url,
    schema,
    openAnother: () => openDatabase(postgresUrl!, { schema }),
    async destroy() {
      await db.knex.raw('drop schema ?? cascade', [schema]);
      await db.close();
    },
  };
}

/** A postgres URL whose connections use `schema` (libpq `options=-c search_path=…`), for child processes. */
export function withSearchPath(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}

/**
 * The error a promise rejected with, or a test failure when it resolved. For errors thrown by
 * better-sqlite3: jest's `rejects.toThrow` does not recognise them as errors once another test
 * file of the same worker process has loaded the driver first. The native addon is loaded once
 * per process and keeps the `SqliteError` class of the first file that loaded it, built on that
 * file's `Error`, which is not this file's (each test file runs in a realm of its own) — the
 * matcher then reports "did not throw" for a promise that did reject. Match the message instead.
 */
export async function rejectionOf(promise: Promise<unknown>): Promise<{ message: string; code?: string }> {
  let outcome: unknown;
  try {
    outcome = await promise;
  } catch (err) {
    return err as { message: string; code?: string };
  }
  throw new Error(`expected a rejection, but the promise resolved with ${JSON.stringify(outcome)}`);
}
