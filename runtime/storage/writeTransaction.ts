import knex, { Knex } from 'knex';
import { dialectOf } from './databaseErrors';

/**
 * Runs `work` in one database transaction that is going to write, and answers what `work`
 * answered. `work` gets a Knex instance whose every statement (builder, `raw`, or the driver-level
 * helpers of storage/database.ts) runs on the transaction's connection. It commits when `work`
 * resolves and rolls back when it throws (the error is thrown on).
 *
 * SQLite: a transaction that reads first and writes later can fail with SQLITE_BUSY when
 * another connection (a second server process, the key CLI) committed in between;
 * busy_timeout does not cover that case. So every write transaction on SQLite begins with
 * `BEGIN IMMEDIATE`, which waits for the write lock up front. (Earlier releases took it with a
 * first write to the one-row `_write_lock` table, which stays.)
 *
 * SQLite also opens, commits and rolls back the transaction through the driver itself rather
 * than through `knex.transaction()`: Knex builds a new Knex instance, client and event emitters
 * for every transaction, about 150 µs of CPU against 20 µs for the statements themselves
 * (docs/architecture.md, "Known traps in the stack"). The instance `work` gets is made once
 * per connection and only lends that connection while one of our transactions is open on it; a
 * statement through it at any other time is refused. The pool has one connection per process on
 * SQLite, and a connection runs one transaction at a time, so the instance is never shared by two
 * open transactions. Postgres keeps Knex's transactions: its claim transaction (idempotency/claim.ts)
 * uses their savepoints, commit and rollback.
 */
export async function inWriteTransaction<T>(db: Knex, work: (trx: Knex) => Promise<T>): Promise<T> {
  if (dialectOf(db) !== 'sqlite') return db.transaction(work);
  const client = db.client as { acquireConnection(): Promise<SqliteConnection>; releaseConnection(conn: unknown): Promise<void> };
  const conn = await client.acquireConnection();
  try {
    return await onOpenTransaction(db, conn, work);
  } finally {
    await client.releaseConnection(conn);
  }
}

/** What this module uses of a better-sqlite3 connection (its prepare is the statement cache's). */
interface SqliteConnection {
  prepare(sql: string): { run(): unknown };
  readonly inTransaction: boolean;
}

async function onOpenTransaction<T>(db: Knex, conn: SqliteConnection, work: (trx: Knex) => Promise<T>): Promise<T> {
  const lent = lenderOf(db, conn);
  if (conn.inTransaction) conn.prepare('ROLLBACK').run(); // left open by a ROLLBACK that failed
  conn.prepare('BEGIN IMMEDIATE').run(); // waits for the write lock up to busy_timeout, or throws
  let result: T;
  try {
    lent.client.lent = conn;
    try {
      result = await work(lent.knex);
    } finally {
      lent.client.lent = undefined;
    }
    conn.prepare('COMMIT').run();
  } catch (err) {
    // a failed COMMIT leaves the transaction open (SQLite keeps it for a retry); end it. A
    // ROLLBACK that fails too must not hide the error that made it necessary.
    try {
      if (conn.inTransaction) conn.prepare('ROLLBACK').run();
    } catch {
      // the next transaction on this connection ends what is left before its BEGIN
    }
    throw err;
  }
  return result;
}

/** A Knex client that runs every statement on the connection it was lent, and only while lent. */
interface LendingClient {
  lent: SqliteConnection | undefined;
}

const lenders = new WeakMap<SqliteConnection, { knex: Knex; client: LendingClient }>();

/** The Knex instance over `conn`, made on first use: a client of the same dialect and settings as `db`'s. */
function lenderOf(db: Knex, conn: SqliteConnection): { knex: Knex; client: LendingClient } {
  let lender = lenders.get(conn);
  if (lender === undefined) {
    const Dialect = db.client.constructor as new (config: Knex.Config) => Knex.Client;
    class Lending extends (Dialect as unknown as new (config: Knex.Config) => Knex.Client) implements LendingClient {
      lent: SqliteConnection | undefined = undefined;
      acquireConnection(): Promise<SqliteConnection> {
        if (this.lent === undefined) return Promise.reject(new Error('This write transaction has ended: a statement ran on it after its commit or rollback.'));
        return Promise.resolve(this.lent);
      }
      releaseConnection(): Promise<void> {
        return Promise.resolve();
      }
    }
    // no `connection` setting: the client opens nothing and has no pool of its own
    const instance = knex({ client: Lending as unknown as typeof Knex.Client, useNullAsDefault: true });
    // what Knex's own transaction clients say of themselves (the SQLite DDL compiler reads it)
    (instance.client as { transacting?: boolean }).transacting = true;
    lender = { knex: instance, client: instance.client as unknown as LendingClient };
    lenders.set(conn, lender);
  }
  return lender;
}
