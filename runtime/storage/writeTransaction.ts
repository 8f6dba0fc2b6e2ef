import knex, { Knex } from 'knex';
import { dialectOf } from './databaseErrors';
import { discardFromPool, enterBatch, leaveBatch, type ConnectionPool, type SqliteConnection } from './sqliteGroupCommit';
import { awaitUnanswered, endPipelining, isPipelining, queryDiscardingEarlier, queryInOrder, sendWithoutWaiting, startPipelining, type PgClient } from './pgPipeline';

/**
 * The server's write transactions, on both databases.
 *
 * A transaction is opened, committed and rolled back through the driver, on a connection taken
 * from Knex's pool, rather than through `knex.transaction()`, which costs about 150 µs of CPU per
 * transaction (its Transaction object and emitters, a transaction client and Knex instance, BEGIN
 * and COMMIT through its query runner) against 20 µs for a one-row insert and its commit on
 * SQLite (docs/architecture.md, "Known traps in the stack").
 * The work gets a Knex instance of its own (made only if the work uses more than the driver-level
 * helpers: see lendTo), which runs every statement
 * (builder, `raw`, or the driver-level helpers of storage/database.ts) on the transaction's
 * connection, and only while that transaction is open: a statement through it at any later time
 * is refused, also while another transaction is open on the same connection. Transactions do not
 * nest: beginning one on a transaction's instance throws.
 *
 * SQLite: a transaction that reads first and writes later can fail with SQLITE_BUSY when
 * another connection (a second server process, the key CLI) committed in between;
 * busy_timeout does not cover that case. So every write transaction on SQLite begins with
 * `BEGIN IMMEDIATE`, which waits for the write lock up front. (Earlier releases took it with a
 * first write to the one-row `_write_lock` table, which stays.) And on SQLite the write
 * transactions of one turn of the event loop share one database transaction and commit together
 * (storage/sqliteGroupCommit.ts); each still keeps or loses its own work as a whole.
 *
 * Postgres: BEGIN, SAVEPOINT and the statements sent with `sendInTransaction`
 * (storage/database.ts) go out without waiting for their answer, which comes with the next
 * statement that waits or with COMMIT (storage/pgPipeline.ts). A failure among them is thrown
 * there, and the transaction rolls back.
 */
export interface WriteTransaction {
  /** Runs statements on the transaction's connection, while the transaction is open. */
  readonly knex: Knex;
  readonly isOpen: boolean;
  /** `name` comes from the code, never from a request. */
  savepoint(name: string): Promise<void>;
  rollbackToSavepoint(name: string): Promise<void>;
  /**
   * Commits; when the COMMIT fails, rolls back what is left and throws its error (on SQLite the
   * error of the group commit it joined, which may come from another write transaction's work).
   */
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
  if ((db.client as { [LENDING]?: true })[LENDING]) throw new Error('Write transactions do not nest: this Knex instance belongs to an open write transaction.');
  const pool = db.client as unknown as ConnectionPool;
  const conn = (await pool.acquireConnection()) as Connection;
  const pg = dialectOf(db) === 'postgres';
  let lent: LentKnex;
  try {
    lent = lendTo(db, conn);
    if (pg) {
      // answered with the transaction's first statement that waits
      startPipelining(conn as PgConnection);
      sendWithoutWaiting(conn as PgConnection, 'BEGIN');
    } else enterBatch(conn as SqliteConnection); // BEGIN IMMEDIATE (waits for the write lock up to busy_timeout, or throws), or joins the open batch
  } catch (err) {
    await pool.releaseConnection(conn);
    throw err;
  }
  return new DriverTransaction(pool, conn, lent, pg);
}

type PgConnection = PgClient;
type Connection = SqliteConnection | PgConnection;

class DriverTransaction implements WriteTransaction {
  private open = true;

  constructor(
    private readonly pool: ConnectionPool,
    private readonly conn: Connection,
    private readonly lent: LentKnex,
    private readonly pg: boolean,
  ) {}

  get knex(): Knex {
    return this.lent.knex;
  }

  get isOpen(): boolean {
    return this.open;
  }

  async savepoint(name: string): Promise<void> {
    this.mustBeOpen();
    // Postgres: answered with the next statement that waits
    if (this.pg) sendWithoutWaiting(this.conn as PgConnection, `savepoint ${name}`);
    else await this.run(`savepoint ${name}`);
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    this.mustBeOpen();
    // what the statements sent since the savepoint failed with is undone with them
    if (this.pg) await queryDiscardingEarlier(this.conn as PgConnection, `rollback to savepoint ${name}`);
    else await this.run(`rollback to savepoint ${name}`);
  }

  async commit(): Promise<void> {
    this.mustBeOpen();
    // ended from here on: a rollback() while the COMMIT runs does nothing
    this.open = false;
    this.lent.end();
    // SQLite: resolves once the group commit this transaction joined has committed
    if (!this.pg) return leaveBatch(this.pool, this.conn as SqliteConnection, true);
    try {
      // with the answers of the statements sent without waiting: when one of them failed, the
      // transaction was aborted, this COMMIT rolled it back, and that failure is thrown
      const done = await queryInOrder(this.conn as PgConnection, 'COMMIT');
      // a failure of the transaction nobody saw (a statement error caught and ignored): Postgres
      // answers such a COMMIT with ROLLBACK, not an error
      if (done.command === 'ROLLBACK') throw new Error('The write transaction had failed: its COMMIT rolled it back.');
    } catch (err) {
      await this.rollbackAndRelease();
      throw err;
    }
    endPipelining(this.conn as PgConnection);
    await this.pool.releaseConnection(this.conn);
  }

  async rollback(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    this.lent.end();
    if (this.pg) await this.rollbackAndRelease();
    else await leaveBatch(this.pool, this.conn as SqliteConnection, false);
  }

  /** Postgres: rolls back whatever is open and gives the connection back, without throwing. */
  private async rollbackAndRelease(): Promise<void> {
    const conn = this.conn as PgConnection;
    try {
      await queryDiscardingEarlier(conn, 'ROLLBACK');
    } catch (err) {
      // a connection whose ROLLBACK failed may still hold the transaction
      discardFromPool(this.conn, err);
    }
    endPipelining(conn);
    await this.pool.releaseConnection(this.conn);
  }

  /** SQLite only: Postgres' statements go through storage/pgPipeline.ts. */
  private async run(sql: string): Promise<void> {
    (this.conn as SqliteConnection).prepare(sql).run();
  }

  private mustBeOpen(): void {
    if (!this.open) throw new Error('This write transaction has ended.');
  }
}

/** The Knex instance one transaction lends its connection through, until end(). */
interface LentKnex {
  knex: Knex;
  end(): void;
}

/** Carried by every lending client, so that a nested begin is recognised. */
const LENDING = Symbol('lends a write transaction');

/**
 * The connection one transaction lends, until it ends; shared by that transaction's clients. A
 * class, not a plain object: copies Knex makes of a client (`withUserParams` merges the client's
 * fields deeply) then share the loan instead of keeping a connection of their own.
 */
class Loan {
  constructor(public conn: Connection | undefined) {}
}

const ENDED = 'This write transaction has ended: a statement ran on it after its commit or rollback.';

function borrow(loan: Loan): Promise<Connection> {
  return loan.conn === undefined ? Promise.reject(new Error(ENDED)) : Promise.resolve(loan.conn);
}

/** Per dialect client: the lending client class, made once. */
const lendingClasses = new WeakMap<object, new (config: Knex.Config) => Knex.Client>();

/**
 * A Knex instance over `conn` for one transaction, with a client of the same dialect and
 * settings as `db`'s. It is never reused: once the transaction ends, every statement through it
 * is refused, whatever runs on the connection later.
 *
 * The instance is made on first use. A Knex instance with its client costs about 20 µs of CPU
 * to make, more than a one-row insert; the statements every write runs go through the driver
 * (storage/database.ts) and need only the client's connection methods and settings, which a
 * plain object answers. So until the work touches anything else of the instance (the query
 * builder, `raw`, …), `trx.client` is that object; from then on both are the real one.
 * Use the instance itself (`trx('table')`, `trx.raw(…)`): Knex's `builder.transacting(trx)`,
 * which reads the client's fields and the instance's own keys, is not supported on it.
 */
function lendTo(db: Knex, conn: Connection): LentKnex {
  const base = db.client as Knex.Client & { valueForUndefined: unknown; version?: string; logger: unknown };
  const loan = new Loan(conn);
  const light = {
    [LENDING]: true as const,
    config: base.config,
    acquireConnection: () => borrow(loan),
    releaseConnection: () => Promise.resolve(),
  };
  let full: Knex | undefined;
  const real = (): Knex => (full ??= fullKnex(base, loan));
  // an arrow function as the target: callable like a Knex instance (`trx('table')`), and without
  // the non-configurable `prototype` a Proxy would have to answer as its target does
  const target = (() => undefined) as unknown as Knex;
  const knexOfLoan = new Proxy(target, {
    get: (_t, prop) => (prop === 'client' && full === undefined ? light : Reflect.get(real(), prop)),
    set: (_t, prop, value) => Reflect.set(real(), prop, value),
    has: (_t, prop) => Reflect.has(real(), prop),
    apply: (_t, thisArg, args) => Reflect.apply(real() as unknown as (...a: unknown[]) => unknown, thisArg, args),
  });
  return {
    knex: knexOfLoan,
    end: () => {
      loan.conn = undefined;
    },
  };
}

/** The real Knex instance of one loan: its client answers the loan's connection while it lasts. */
function fullKnex(base: Knex.Client & { valueForUndefined: unknown; version?: string; logger: unknown }, loan: Loan): Knex {
  let Lending = lendingClasses.get(base);
  if (Lending === undefined) {
    const Dialect = base.constructor as unknown as new (config: Knex.Config) => Knex.Client;
    class LendingClient extends Dialect {
      loan = new Loan(undefined);
      async acquireConnection(): Promise<Connection> {
        const conn = await borrow(this.loan);
        // Knex's own statements wait for their answers one by one: the statements sent without
        // waiting are answered first, so that their failure is thrown as itself, not as the
        // "transaction is aborted" of the statement after it
        if (isPipelining(conn as PgConnection)) await awaitUnanswered(conn as PgConnection);
        return conn;
      }
      releaseConnection(): Promise<void> {
        return Promise.resolve();
      }
    }
    // on the prototype, not the instance: the clients Knex derives from this one with
    // Object.create (a nested `trx.transaction()`) carry it too, so a nested begin is refused
    Object.defineProperty(LendingClient.prototype, LENDING, { value: true });
    Lending = LendingClient;
    lendingClasses.set(base, Lending);
  }
  // no `connection` setting: the client opens nothing and has no pool of its own
  const instance = knex({ client: Lending as unknown as typeof Knex.Client, useNullAsDefault: true });
  const client = instance.client as unknown as { config: unknown; transacting: boolean; valueForUndefined: unknown; version?: string; logger: unknown; loan: Loan };
  // what Knex's own transaction clients copy from the pool's client: its settings (the dialect's
  // name that dialectOf reads among them), what an undefined value inserts (DEFAULT on Postgres),
  // the server version and the logger; and what they say of themselves (the SQLite DDL compiler reads it)
  client.config = base.config;
  client.valueForUndefined = base.valueForUndefined;
  client.version = base.version;
  client.logger = base.logger;
  client.transacting = true;
  client.loan = loan;
  return instance;
}
