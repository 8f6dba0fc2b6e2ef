import fs from 'node:fs';
import path from 'node:path';
import knex, { Knex } from 'knex';
import { types as pgTypes, type QueryConfig } from 'pg';

import { Dialect } from './databaseErrors';
import { AUTOCHECKPOINT_PAGES, Checkpointer, startCheckpointer } from './sqliteCheckpoints';
import { commitOtherBatches } from './sqliteGroupCommit';
import { isPipelining, queryInOrder, sendWithoutWaiting } from './pgPipeline';
import { readsShareAConnection, sharedReadConnection } from './sharedReads';
import { lentConnection, noteChange } from './lentKnex';
export type { Dialect };

export interface Database {
  knex: Knex;
  dialect: Dialect;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Postgres only: the schema every query uses (tests get a fresh one per test file). */
  schema?: string;
  /** Postgres only: pool size (default 10). */
  poolMax?: number;
  /**
   * Postgres only: how long a statement may go unanswered before its connection is given up
   * (node-postgres' `query_timeout`; none by default). See openDatabase.
   */
  queryTimeoutMs?: number;
  /**
   * Postgres only, with queryTimeoutMs: how long a session may sit in an open transaction without
   * a statement before Postgres ends it (`idle_in_transaction_session_timeout`). Longer than any
   * wait the server makes inside a transaction on purpose (a keyed write's `prepare` step).
   */
  idleInTransactionMs?: number;
}

/**
 * Opens the database named by a DATABASE_URL: `sqlite:relative/file.sqlite`,
 * `sqlite:///absolute/file.sqlite` or `postgres://…`.
 */
export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  if (url.startsWith('sqlite:')) {
    const filename = sqliteFilename(url);
    if (filename !== ':memory:') fs.mkdirSync(path.dirname(filename), { recursive: true });
    // started once the file exists (the pool's first connection creates it); storage/sqliteCheckpoints.ts
    let checkpointer: Checkpointer | undefined;
    const db = knex({
      client: 'better-sqlite3',
      connection: { filename },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: 1,
        afterCreate(conn: any, done: (err: Error | null, conn: unknown) => void) {
          try {
            // WAL lets readers in other processes work during a write; busy_timeout makes a
            // second process (or the key CLI) wait for the write lock instead of failing.
            conn.pragma('journal_mode = WAL');
            conn.pragma('busy_timeout = 5000');
            conn.pragma('foreign_keys = ON');
            conn.pragma('synchronous = NORMAL');
            // the write transactions of a group commit are savepoints (storage/sqliteGroupCommit.ts),
            // and SQLite copies each page a savepoint changes to a sub-journal first: in memory, not
            // a temporary file
            conn.pragma('temp_store = MEMORY');
            // the bound on the WAL; the checkpoints themselves run on a thread of their own
            conn.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
            if (filename !== ':memory:') checkpointer ??= startCheckpointer(filename);
            cacheStatements(conn);
            done(null, conn);
          } catch (err) {
            done(err as Error, conn);
          }
        },
      },
    });
    return {
      knex: db,
      dialect: 'sqlite',
      async close() {
        await db.destroy();
        await checkpointer?.stop();
      },
    };
  }
  // When Postgres cannot be reached, a request must fail fast (503 within 2 s) instead of
  // waiting for knex's default 60 s acquire timeout: a connection attempt gives up after 1 s,
  // waiting for a free pool connection after 1.5 s. Keepalive notices a dead peer on idle
  // connections; the pool discards broken connections and reconnects on its own.
  // `pipeline`: a query is written while earlier ones are unanswered, which the write
  // transactions use (storage/pgPipeline.ts); everything else still waits for each answer.
  // `types`: 64-bit integers (`seq`, counts) read as numbers, as SQLite gives them (parseInt8)
  // `query_timeout` (the server's and the engine's handles: DATABASE_QUERY_TIMEOUT_SECONDS): a
  // connection whose peer stops answering without closing anything — a network partition, a
  // frozen proxy — is acknowledged by TCP and never noticed by keepalive, and every statement sent
  // on it (and, pipelined, every one behind it) would wait for ever. node-postgres fails the
  // statement after the timeout and, its statements being pipelined, destroys the connection, so
  // the pool opens a new one; the request answers 503 (databaseErrors.ts). Migrations run on a
  // handle without it: an index build may rightly take long.
  const db = knex({
    client: 'pg',
    log: KNEX_LOG,
    connection: {
      connectionString: url, connectionTimeoutMillis: 1000, keepAlive: true, pipeline: true, types: { getTypeParser: pgTypeParser },
      ...(options.queryTimeoutMs ? serverSideBounds(url, options.queryTimeoutMs, options.idleInTransactionMs) : {}),
    } as Knex.PgConnectionConfig,
    searchPath: options.schema ? [options.schema] : undefined,
    acquireConnectionTimeout: 1500,
    pool: { min: 0, max: options.poolMax ?? 10 },
  });
  return { knex: db, dialect: 'postgres', close: () => db.destroy() };
}

/**
 * The client's `query_timeout` and what makes the server give up too. On the timeout node-postgres
 * only closes the socket: a statement waiting on a lock would keep its backend, and its locks, until
 * it got the lock, and every timed-out request would leave one more (a migration's table lock held
 * for minutes could exhaust max_connections). So each session also gets a `statement_timeout`
 * a little shorter (Postgres cancels the statement itself, and the connection stays usable), and
 * an `idle_in_transaction_session_timeout`, which ends a transaction whose client went away in
 * the middle of it (a partition) instead of leaving it holding the organization's write lock until
 * TCP gives up. Settings given in DATABASE_URL's `options` win: they are left as they are.
 */
function serverSideBounds(url: string, queryTimeoutMs: number, idleInTransactionMs?: number): Record<string, number> {
  return {
    query_timeout: queryTimeoutMs,
    ...(/statement_timeout/.test(url) ? {} : { statement_timeout: Math.max(1, queryTimeoutMs - Math.min(1000, Math.floor(queryTimeoutMs / 4))) }),
    ...(idleInTransactionMs === undefined || /idle_in_transaction_session_timeout/.test(url) ? {} : { idle_in_transaction_session_timeout: idleInTransactionMs }),
  };
}

/**
 * Knex reports a failed connection attempt (a database that is down, or does not exist) as a
 * warning with the driver's stack trace, once per attempt: every request and every poll during
 * an outage. One line says the same, and the same line again within a minute is counted instead
 * of printed (the count comes with the next one printed). The error itself still reaches the
 * caller (a request answers 503, a start stops with its message).
 */
const KNEX_LOG = { warn: repeatsCounted((line) => console.warn(line)) };

/** A warning printer that prints a line once a minute at most, saying how many times it was repeated meanwhile. */
export function repeatsCounted(print: (line: string) => void, intervalMs = 60_000, now = Date.now): (message: unknown) => void {
  const last = new Map<string, { at: number; repeated: number }>();
  return (message) => {
    const line = String(message).split('\n')[0];
    const seen = last.get(line);
    const at = now();
    if (seen && at - seen.at < intervalMs) {
      seen.repeated++;
      return;
    }
    if (last.size > 100) last.clear(); // distinct lines are few; never a growing map
    print(seen?.repeated ? `${line} (and ${seen.repeated} more times in the last ${Math.round((at - seen.at) / 1000)} s)` : line);
    last.set(line, { at, repeated: 0 });
  };
}

const INT8_OID = 20;

/**
 * node-postgres answers 64-bit integers as strings, since JavaScript numbers are exact only up to
 * 2^53. Every `seq` is 64-bit (migrations/0010_seq_bigint.ts) and the API answers `sequence` and
 * cursors as JSON numbers: a value past 2^53 (nine thousand million million, centuries of writes)
 * fails the read loudly rather than being rounded.
 */
export function parseInt8(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new RangeError(`64-bit integer ${text} is beyond what a JSON number holds exactly`);
  return n;
}

/** node-postgres' own parsers, but parseInt8 for 64-bit integers in text form. */
const pgTypeParser: typeof pgTypes.getTypeParser = (oid, format) =>
  oid === INT8_OID && format !== 'binary' ? parseInt8 : pgTypes.getTypeParser(oid, format);

function sqliteFilename(url: string): string {
  const rest = url.slice('sqlite:'.length);
  if (rest === ':memory:') return rest;
  if (rest.startsWith('//')) return rest.slice(2); // sqlite:///abs/path → /abs/path
  return path.resolve(rest);
}

/**
 * Knex's better-sqlite3 dialect prepares every statement anew (docs/architecture.md, "Known traps in the stack"): on the
 * hot paths preparing costs more than running. Statements are plain SQL text with `?`
 * bindings, so one prepared statement per distinct text can be reused; knex only calls
 * `.all()`/`.run()` on them (synchronously, never an open iterator), so reuse is safe.
 * Bounded: bulk inserts of varying row counts produce many distinct texts.
 */
const STATEMENT_CACHE_SIZE = 256;

/**
 * Every transaction this server opens on SQLite writes, so each starts with the write lock:
 * `BEGIN IMMEDIATE` instead of Knex's plain `BEGIN`, which would take it only at the first write
 * and fail with SQLITE_BUSY when another process committed after the transaction's first read
 * (busy_timeout does not cover that upgrade). The request's write transactions begin that way
 * themselves (storage/writeTransaction.ts); this covers the ones Knex still opens (migrations).
 */
const BEGIN_IMMEDIATE = 'BEGIN IMMEDIATE;';
function cacheStatements(conn: { prepare(sql: string): unknown }): void {
  const prepare = conn.prepare.bind(conn);
  const cache = new Map<string, unknown>();
  conn.prepare = (text: string) => {
    commitOtherBatches(conn);
    const sql = text === 'BEGIN;' ? BEGIN_IMMEDIATE : text;
    let statement = cache.get(sql);
    if (statement === undefined) {
      statement = prepare(sql);
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
    } else {
      cache.delete(sql); // re-inserted below: most recently used last
    }
    cache.set(sql, statement);
    return statement;
  };
}

/**
 * Runs one fixed `select` (plain SQL, `?` bindings) on a connection Knex manages — taken from
 * and given back to its pool, or the transaction's own connection when `db` is a transaction —
 * straight through the driver. For the statements every request runs (the key lookup, a read
 * by id): Knex's builder, runner and response layers cost more than the statement itself
 * there (bench/README.md, profile). On SQLite the connection's statement cache serves it. On
 * Postgres outside a transaction it rides the connection the point reads share
 * (storage/sharedReads.ts): only short point reads by an index belong here, since a slow one
 * would hold up every read behind it.
 */
export async function selectRows<T>(db: Knex, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  // Postgres, outside a transaction: on the connection the point reads share (storage/sharedReads.ts)
  if (readsShareAConnection(db)) return (await (await sharedReadConnection(db)).query(pgStatement(sql, bindings))).rows as T[];
  return rowsOnOwnConnection<T>(db, sql, bindings);
}

/**
 * Runs one fixed write statement that answers rows (`insert … returning`) the way selectRows
 * runs a select: straight through the driver, on the transaction's connection when `db` is one.
 * For the writes every keyed request makes (the Idempotency-Key's claim).
 */
export async function writeReturning<T>(db: Knex, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  noteChange(db);
  // never on the connection the point reads share: a write waits on its own connection
  return rowsOnOwnConnection<T>(db, sql, bindings);
}

/** The rows of one statement on the transaction's connection, or on one taken from the pool. */
async function rowsOnOwnConnection<T>(db: Knex, sql: string, bindings: readonly Binding[]): Promise<T[]> {
  return onDriverConnection(db, async (conn, pg) => (pg ? (await queryInOrder(conn, pgStatement(sql, bindings))).rows : conn.prepare(sql).all(...bindings)) as T[]);
}

/**
 * Runs one fixed write statement without a result (an insert, an update) the way selectRows runs
 * a select, and answers how many rows it changed. For the statements every write runs (the
 * Idempotency-Key's row, the ordered insert of a listed table).
 */
export async function runStatement(db: Knex, sql: string, bindings: readonly Binding[]): Promise<number> {
  noteChange(db);
  return onDriverConnection(db, async (conn, pg) => (pg ? (await queryInOrder(conn, pgStatement(sql, bindings))).rowCount ?? 0 : conn.prepare(sql).run(...bindings).changes) as number);
}

/**
 * Runs `work` on the SQLite connection under `db`, counted as a change: for a write's fixed
 * statements that belong together (the event of a write and the lookup of the subscriptions
 * listening to it; a batch of sensor readings). better-sqlite3 runs statements synchronously,
 * so nothing comes between them. In one of the server's write transactions (storage/
 * writeTransaction.ts) `work` runs at once on its connection, with no promise around it: every
 * domain write records an event, and Knex's acquire and release of the connection around each
 * statement were a fifth of the event's CPU (bench/README.md, "What changed in this round").
 * Elsewhere through Knex's acquire and release: a Knex transaction's own connection, or one
 * taken from the pool. SQLite only.
 */
export async function onSqliteConnection<R>(db: Knex, work: (conn: SqliteStatements) => R): Promise<R> {
  noteChange(db);
  const lent = lentConnection(db);
  if (lent !== undefined) return work(lent as unknown as SqliteStatements);
  return onDriverConnection(db, async (conn) => work(conn));
}

/** What onSqliteConnection's work uses of a better-sqlite3 connection (its prepare is the statement cache's). */
export interface SqliteStatements {
  prepare(sql: string): {
    all(...bindings: readonly Binding[]): unknown[];
    run(...bindings: readonly Binding[]): { changes: number };
  };
}

/**
 * Runs one fixed write statement whose answer the code does not need (the event of a write, the
 * stored answer of an Idempotency-Key). In a Postgres write transaction it is sent without
 * waiting (storage/pgPipeline.ts): it is answered with the transaction's next statement that
 * waits, or with its COMMIT, and its failure (as `mapError` makes it) is thrown there and rolls
 * the transaction back — so it must be written to fail, not to change nothing, when the caller
 * needs it to have changed something. Elsewhere it runs and is waited for, and its failure is
 * thrown here.
 */
export async function sendInTransaction(
  db: Knex,
  sql: string,
  bindings: readonly Binding[],
  /** Answers the error to throw for the statement's failure (never undefined). */
  mapError: (err: unknown) => unknown = (err) => err,
): Promise<void> {
  noteChange(db);
  await onDriverConnection(db, async (conn, pg) => {
    try {
      if (!pg) conn.prepare(sql).run(...bindings);
      else if (isPipelining(conn)) sendWithoutWaiting(conn, pgStatement(sql, bindings), mapError);
      else await conn.query(pgStatement(sql, bindings));
    } catch (err) {
      throw mapError(err);
    }
  });
}

export type Binding = string | number | null;

/**
 * Runs `work` on the driver's connection under `db`: the transaction's own connection when `db`
 * is a transaction, else one taken from Knex's pool and given back after.
 */
async function onDriverConnection<R>(db: Knex, work: (conn: any, pg: boolean) => Promise<R>): Promise<R> {
  const client = db.client as { config: { client: string }; acquireConnection(): Promise<any>; releaseConnection(conn: unknown): Promise<void> };
  const conn = await client.acquireConnection();
  try {
    return await work(conn, client.config.client === 'pg');
  } finally {
    await client.releaseConnection(conn);
  }
}

/**
 * The pg query of a fixed text: `?` → `$1, $2…`, and a name, so that each connection parses and
 * plans the statement once and then only binds and executes it (a named prepared statement,
 * node-postgres' per-connection cache). Postgres shares the machine's cores with the server in
 * small deployments, and for these one-row statements parsing and planning were most of its
 * work. The texts name their columns (no `select *`): a prepared statement must keep its result
 * type, so a column added by a later migration does not break a running server's statements.
 * The set of texts is fixed by the code; the bound is a guard.
 */
const pgTexts = new Map<string, { name: string; text: string }>();
function pgStatement(sql: string, bindings: readonly Binding[]): QueryConfig<Binding[]> {
  // node-postgres reads the values, never changes them
  const values = bindings as Binding[];
  let known = pgTexts.get(sql);
  if (known === undefined) {
    let n = 0;
    known = { name: `fop_${pgTexts.size + 1}`, text: sql.replace(/\?/g, () => `$${++n}`) };
    if (pgTexts.size >= STATEMENT_CACHE_SIZE) return { text: known.text, values };
    pgTexts.set(sql, known);
  }
  return { name: known.name, text: known.text, values };
}
