import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Knex } from 'knex';
import { DIST } from './build';
import { READING_COLUMNS, SENSORS, SITES, seedTime } from './readings';

/**
 * A fresh database for one scenario, migrated and holding one API key with every scope, made
 * with the server's own compiled modules (dist/) so schema and key format are exactly the
 * server's. SQLite: a new file in a temporary folder. Postgres: a new schema in the database
 * of DATABASE_URL, passed to the server as `options=-c search_path=…` in its URL.
 */
export interface BenchDatabase {
  dialect: 'sqlite' | 'postgres';
  /** DATABASE_URL for the server process. */
  serverUrl: string;
  /** The SQLite file (SQLite only). */
  file?: string;
  secret: string;
  orgId: string;
  /** Rows of the table; with `prefix`, only those whose `column` starts with it (subjects sharing a table). */
  count(table: string, prefix?: { column: string; value: string }): Promise<number>;
  maxSeq(table: string): Promise<number>;
  /** Removes rows stored after `seq` (resets the table between ingest repetitions). */
  deleteAfter(table: string, seq: number): Promise<void>;
  /** One row by id (to copy the scenario's row into a baseline's database). */
  getRow(table: string, id: string): Promise<Record<string, unknown> | undefined>;
  /** Inserts `count` seeded readings straight into the table (numbered from 0). */
  seedReadings(count: number): Promise<void>;
  insertRow(table: string, row: Record<string, unknown>): Promise<void>;
  /** Closes the bench's connection and removes the database (file or schema). */
  dispose(): Promise<void>;
}

// Typed from the runtime's sources; the code itself is loaded from dist/ (what the server runs).
type RuntimeModules = typeof import('../../runtime/storage/database')
  & typeof import('../../runtime/storage/migrate')
  & Pick<typeof import('../../runtime/auth/apiKeys'), 'createApiKey' | 'ALL_SCOPES'>;

let modules: RuntimeModules | undefined;
function runtime(): RuntimeModules {
  // loaded lazily: dist/ may only just have been built
  modules ??= {
    ...require(path.join(DIST, 'runtime', 'storage', 'database.js')),
    ...require(path.join(DIST, 'runtime', 'storage', 'migrate.js')),
    ...require(path.join(DIST, 'runtime', 'auth', 'apiKeys.js')),
  } as RuntimeModules;
  return modules;
}

export function isPostgres(url: string | undefined): url is string {
  return url !== undefined && /^postgres(ql)?:\/\//.test(url);
}

let tempRoot: string | undefined;
export function benchTempDir(): string {
  tempRoot ??= fs.mkdtempSync(path.join(os.tmpdir(), 'fop-bench-'));
  return tempRoot;
}
export function removeTempDir(): void {
  if (tempRoot) fs.rmSync(tempRoot, { recursive: true, force: true });
}

let counter = 0;

/** A fresh database: Postgres when `postgresUrl` is given, else a SQLite file. */
export async function createBenchDatabase(name: string, postgresUrl?: string): Promise<BenchDatabase> {
  return postgresUrl ? createPostgres(name, postgresUrl) : createSqlite(name);
}

async function prepare(url: string, schema?: string): Promise<{ knex: Knex; close(): Promise<void>; secret: string; orgId: string }> {
  const { openDatabase, migrateLatest, createApiKey, ALL_SCOPES } = runtime();
  const database = openDatabase(url, { schema, poolMax: 2 });
  if (schema) await database.knex.raw(`create schema if not exists "${schema}"`);
  await migrateLatest(database.knex);
  const { key, secret } = await createApiKey(database.knex, { scopes: ALL_SCOPES, name: 'bench' });
  return { knex: database.knex, close: () => database.close(), secret, orgId: key.organizationId };
}

export async function createSqlite(name: string): Promise<BenchDatabase> {
  const file = path.join(benchTempDir(), `${name}-${++counter}.sqlite`);
  const prepared = await prepare(`sqlite:${file}`);
  await prepared.close();
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('synchronous = NORMAL');
  return {
    dialect: 'sqlite',
    serverUrl: `sqlite:${file}`,
    file,
    secret: prepared.secret,
    orgId: prepared.orgId,
    count: async (table, prefix) =>
      (prefix
        ? (db.prepare(`select count(*) as n from ${table} where substr(${prefix.column}, 1, ?) = ?`).get(prefix.value.length, prefix.value) as { n: number })
        : (db.prepare(`select count(*) as n from ${table}`).get() as { n: number })
      ).n,
    maxSeq: async (table) => (db.prepare(`select coalesce(max(seq), 0) as n from ${table}`).get() as { n: number }).n,
    deleteAfter: async (table, seq) => {
      db.prepare(`delete from ${table} where seq > ?`).run(seq);
    },
    getRow: async (table, id) => db.prepare(`select * from ${table} where id = ?`).get(id) as Record<string, unknown> | undefined,
    seedReadings: async (count) => seedSqlite(db, prepared.orgId, count),
    insertRow: async (table, row) => {
      // better-sqlite3 binds no booleans or dates (a row copied from Postgres may hold them)
      const values = Object.values(row).map((v) => (typeof v === 'boolean' ? Number(v) : v instanceof Date ? v.toISOString() : v));
      db.prepare(`insert into ${table} (${Object.keys(row).join(', ')}) values (${values.map(() => '?').join(', ')})`).run(...values);
    },
    dispose: async () => {
      db.close();
      for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true });
    },
  };
}

/**
 * The rows are generated by SQLite itself (`insert … select` over a counter, 100 000 rows per
 * statement and transaction: no per-row JavaScript), with the table's indexes dropped during
 * the load and created again after it (one sort per index instead of a million B-tree
 * inserts). The schema ends up exactly the server's; a million rows take a few seconds.
 */
function seedSqlite(db: BetterSqlite3.Database, orgId: string, count: number): void {
  const insert = db.prepare(
    `with recursive n(g) as (select cast(? as integer) union all select g + 1 from n where g + 1 < cast(? as integer))
     insert into sensor_readings (${READING_COLUMNS.join(', ')})
     select 'srd_' || lower(hex(randomblob(12))), ?, 'seed', 's' || (g % ${SENSORS}), null,
            printf('site_bench_%02d', (g % ${SENSORS}) % ${SITES}), 'temperature_c', (g % 400) / 10.0, 'C',
            strftime('%Y-%m-%dT%H:%M:%fZ', cast(? as integer) + (g / ${SENSORS}) * 60, 'unixepoch'), ?
     from n`,
  );
  const createdAt = new Date().toISOString();
  const start = Date.parse(seedTime(0)) / 1000;
  const indexes = db.prepare("select name, sql from sqlite_master where type = 'index' and tbl_name = 'sensor_readings' and sql is not null").all() as { name: string; sql: string }[];
  for (const index of indexes) db.exec(`drop index "${index.name}"`);
  try {
    for (let from = 0; from < count; from += 100_000) insert.run(from, Math.min(from + 100_000, count), orgId, start, createdAt);
  } finally {
    for (const index of indexes) db.exec(index.sql);
  }
}

async function createPostgres(name: string, baseUrl: string): Promise<BenchDatabase> {
  const schema = `bench_${process.pid}_${++counter}_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`;
  const prepared = await prepare(baseUrl, schema);
  const db = prepared.knex;
  const separator = baseUrl.includes('?') ? '&' : '?';
  return {
    dialect: 'postgres',
    serverUrl: `${baseUrl}${separator}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    secret: prepared.secret,
    orgId: prepared.orgId,
    count: async (table, prefix) => {
      const query = db(table).count({ n: '*' });
      if (prefix) query.whereRaw(`left(??, ?) = ?`, [prefix.column, prefix.value.length, prefix.value]);
      return Number((await query.first())?.n ?? 0);
    },
    maxSeq: async (table) => Number((await db(table).max({ n: 'seq' }).first())?.n ?? 0),
    deleteAfter: async (table, seq) => {
      await db(table).where('seq', '>', seq).delete();
    },
    getRow: async (table, id) => db(table).where({ id }).first(),
    insertRow: async (table, row) => {
      await db(table).insert(row);
    },
    // generated in the database like the SQLite seed: random ids, one reading per sensor per minute
    seedReadings: async (count) => {
      // as on SQLite: the indexes (and unique constraints) are dropped during the load and
      // built again after it, one sort each instead of a million B-tree inserts
      const constraints = rowsOf<{ name: string; def: string }>(
        await db.raw("select conname as name, pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'sensor_readings'::regclass and contype = 'u'"),
      );
      const indexes = rowsOf<{ name: string; def: string }>(
        await db.raw(
          `select i.relname as name, pg_get_indexdef(i.oid) as def from pg_index x join pg_class i on i.oid = x.indexrelid
           where x.indrelid = 'sensor_readings'::regclass and not x.indisprimary and not exists (select 1 from pg_constraint c where c.conindid = i.oid)`,
        ),
      );
      for (const c of constraints) await db.raw(`alter table sensor_readings drop constraint "${c.name}"`);
      for (const i of indexes) await db.raw(`drop index "${i.name}"`);
      for (let from = 0; from < count; from += 200_000) {
        await db.raw(
          `insert into sensor_readings (${READING_COLUMNS.join(', ')})
           select 'srd_' || substr(md5(random()::text || g::text), 1, 24), ?, 'seed', 's' || (g % ${SENSORS}),
                  null, 'site_bench_' || lpad(((g % ${SENSORS}) % ${SITES})::text, 2, '0'), 'temperature_c', (g % 400) / 10.0, 'C',
                  to_char(timestamp '2026-01-01 00:00:00' + (g / ${SENSORS}) * interval '1 minute', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                  to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
           from generate_series(?::bigint, ?::bigint) as g`,
          [prepared.orgId, from, Math.min(from + 200_000, count) - 1],
        );
      }
      for (const c of constraints) await db.raw(`alter table sensor_readings add constraint "${c.name}" ${c.def}`);
      for (const i of indexes) await db.raw(i.def);
      await db.raw('analyze sensor_readings');
    },
    dispose: async () => {
      await db.raw(`drop schema if exists "${schema}" cascade`);
      await prepared.close();
    },
  };
}

/**
 * A DATABASE_URL naming an empty database (no tables, no key), for timing a first start:
 * a file path that does not exist yet, or an empty Postgres schema.
 */
export async function emptyDatabase(name: string, postgresUrl?: string): Promise<{ url: string; dispose(): Promise<void> }> {
  if (!postgresUrl) {
    const file = path.join(benchTempDir(), `${name}-${++counter}.sqlite`);
    return { url: `sqlite:${file}`, dispose: async () => { for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true }); } };
  }
  const schema = `bench_${process.pid}_${++counter}_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`;
  const admin = runtime().openDatabase(postgresUrl, { poolMax: 1 });
  await admin.knex.raw(`create schema "${schema}"`);
  const separator = postgresUrl.includes('?') ? '&' : '?';
  return {
    url: `${postgresUrl}${separator}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    dispose: async () => {
      await admin.knex.raw(`drop schema if exists "${schema}" cascade`);
      await admin.close();
    },
  };
}

/** `db.raw` answers a result object on pg (rows on better-sqlite3). */
function rowsOf<T>(result: unknown): T[] {
  return Array.isArray(result) ? (result as T[]) : (result as { rows: T[] }).rows;
}
