import knex, { Knex } from 'knex';
import { dialectOf } from './databaseErrors';

/**
 * The server's write transactions, on both databases.
 *
 * A transaction is opened, committed and rolled back through the driver, on a connection taken
 * from Knex's pool, rather than through `knex.transaction()`: Knex builds a new Knex instance,
 * client and event emitters for every transaction, about 150 µs of CPU, against 20 µs for a
 * one-row insert and its commit on SQLite (docs/architecture.md, "Known traps in the stack").
 * The work gets a Knex instance made once per connection, which runs every statement (builder,
 * `raw`, or the driver-level helpers of storage/database.ts) on that connection, and only while
 * one of our transactions is open on it: a statement at any other time is refused. A connection
 * runs one transaction at a time, so the instance is never shared by two open transactions.
 *
 * SQLite: a transaction that reads first and writes later can fail with SQLITE_BUSY when
 * another connection (a second server process, the key CLI) committed in between;
 * busy_timeout does not cover that case. So every write transaction on SQLite begins with
 * `BEGIN IMMEDIATE`, which waits for the write lock up front. (Earlier releases took it with a
 * first write to the one-row `_write_lock` table, which stays.)
 */
export interface WriteTransaction {
  /** Runs statements on the transaction's connection, while the transaction is open. */
  readonly knex: Knex;
  readonly isOpen: boolean;
  /** `name` comes from the code, never from a request. */
  savepoint(name: string): Promise<void>;
  rollbackToSavepoint(name: string): Promise<void>;
  /** Commits; when the COMMIT fails, rolls back what is left and throws its error. */
  commit(): Promise<void>;
  /**
   * Ends the transaction keeping nothing. Never throws: a ROLLBACK that fails means the
   * connection is gone, and the transaction with it (the pool replaces a broken connection).
   */
  rollback(): Promise<void>;
}

/**
 * Runs `work` in one write transaction and answers what `work` answered: commits when it
 * resolves, rolls back when it throws (the error is thrown on).
 */
export async function inWriteTransaction<T>(db: Knex, work: (trx: Knex) => Promise<T>): Promise<T> {
  const trx = await beginWriteTransaction(db);
  let result: T;
  try {
    result = await work(trx.knex);
  } catch (err) {
    await trx.rollback();
    throw err;
  }
  await trx.commit();
  return result;
}

/**
 * Opens a write transaction that stays open until its commit or rollback: for the
 * Idempotency-Key's claim on Postgres, which holds its lock from the claim to the operation's
 * commit (idempotency/claim.ts). Everything else uses inWriteTransaction.
 */
export async function beginWriteTransaction(db: Knex): Promise<WriteTransaction> {
  const pool = db.client as { acquireConnection(): Promise<Connection>; releaseConnection(conn: unknown): Promise<void> };
  const conn = await pool.acquireConnection();
  const pg = dialectOf(db) === 'postgres';
  let lender: Lender;
  try {
    lender = lenderOf(db, conn);
    if (pg) {
      await (conn as PgConnection).query('BEGIN');
    } else {
      const sqlite = conn as SqliteConnection;
      if (sqlite.inTransaction) sqlite.prepare('ROLLBACK').run(); // left open by a ROLLBACK that failed
      sqlite.prepare('BEGIN IMMEDIATE').run(); // waits for the write lock up to busy_timeout, or throws
    }
  } catch (err) {
    await pool.releaseConnection(conn);
    throw err;
  }
  lender.client.lent = conn;
  return new DriverTransaction(pool, conn, lender, pg);
}

/** What this module uses of a better-sqlite3 connection (its prepare is the statement cache's). */
interface SqliteConnection {
  prepare(sql: string): { run(): unknown };
  readonly inTransaction: boolean;
}
/** What this module uses of a node-postgres connection. */
interface PgConnection {
  query(sql: string): Promise<unknown>;
}
type Connection = SqliteConnection | PgConnection;

class DriverTransaction implements WriteTransaction {
  private open = true;

  constructor(
    private readonly pool: { releaseConnection(conn: unknown): Promise<void> },
    private readonly conn: Connection,
    private readonly lender: Lender,
    private readonly pg: boolean,
  ) {}

  get knex(): Knex {
    return this.lender.knex;
  }

  get isOpen(): boolean {
    return this.open;
  }

  async savepoint(name: string): Promise<void> {
    this.mustBeOpen();
    await this.run(`savepoint ${name}`);
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    this.mustBeOpen();
    await this.run(`rollback to savepoint ${name}`);
  }

  async commit(): Promise<void> {
    this.mustBeOpen();
    this.lender.client.lent = undefined;
    try {
      await this.run('COMMIT');
    } catch (err) {
      // SQLite keeps a transaction whose COMMIT failed open (Postgres ends it): end it here
      await this.end();
      throw err;
    }
    this.open = false;
    await this.pool.releaseConnection(this.conn);
  }

  async rollback(): Promise<void> {
    if (!this.open) return;
    this.lender.client.lent = undefined;
    await this.end();
  }

  /** Rolls back whatever is open and gives the connection back, without throwing. */
  private async end(): Promise<void> {
    this.open = false;
    try {
      if (this.pg || (this.conn as SqliteConnection).inTransaction) await this.run('ROLLBACK');
    } catch {
      // the connection is gone (Postgres; the pool discards it) or the next BEGIN ends what is left (SQLite)
    }
    await this.pool.releaseConnection(this.conn);
  }

  private async run(sql: string): Promise<void> {
    if (this.pg) await (this.conn as PgConnection).query(sql);
    else (this.conn as SqliteConnection).prepare(sql).run();
  }

  private mustBeOpen(): void {
    if (!this.open) throw new Error('This write transaction has ended.');
  }
}

/** A Knex client that runs every statement on the connection it was lent, and only while lent. */
interface LendingClient {
  lent: Connection | undefined;
}
interface Lender {
  knex: Knex;
  client: LendingClient;
}

const lenders = new WeakMap<Connection, Lender>();

/** The Knex instance over `conn`, made on first use: a client of the same dialect and settings as `db`'s. */
function lenderOf(db: Knex, conn: Connection): Lender {
  let lender = lenders.get(conn);
  if (lender === undefined) {
    const Dialect = db.client.constructor as unknown as new (config: Knex.Config) => Knex.Client;
    class Lending extends Dialect implements LendingClient {
      lent: Connection | undefined = undefined;
      acquireConnection(): Promise<Connection> {
        if (this.lent === undefined) return Promise.reject(new Error('This write transaction has ended: a statement ran on it after its commit or rollback.'));
        return Promise.resolve(this.lent);
      }
      releaseConnection(): Promise<void> {
        return Promise.resolve();
      }
    }
    // no `connection` setting: the client opens nothing and has no pool of its own
    const instance = knex({ client: Lending as unknown as typeof Knex.Client, useNullAsDefault: true });
    const client = instance.client as unknown as { config: Knex.Config; transacting: boolean };
    // the settings of `db` (the dialect's name that dialectOf reads among them), and what Knex's
    // own transaction clients say of themselves (the SQLite DDL compiler reads it)
    client.config = db.client.config;
    client.transacting = true;
    lender = { knex: instance, client: instance.client as unknown as LendingClient };
    lenders.set(conn, lender);
  }
  return lender;
}
