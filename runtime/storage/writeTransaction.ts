import type { Knex } from 'knex';
import { dialectOf } from './databaseErrors';
import { enterBatch, leaveBatch, type SqliteConnection } from './sqliteGroupCommit';
import type { ConnectionPool } from './connectionPool';
import { endPipelining, queryDiscardingEarlier, queryInOrder, rollBackAndRelease, sendWithoutWaiting, startPipelining } from './pgPipeline';
import { isLent, LendingTransaction, lendTo, type Connection, type LentKnex, type PgConnection, type WriteTransaction } from './lentKnex';
import { joinBatchOf } from './pgGroupCommit';

/**
 * The server's write transactions, on both databases.
 *
 * A transaction is opened, committed and rolled back through the driver, on a connection taken
 * from Knex's pool, rather than through `knex.transaction()`, which costs about 150 µs of CPU per
 * transaction (its Transaction object and emitters, a transaction client and Knex instance, BEGIN
 * and COMMIT through its query runner) against 20 µs for a one-row insert and its commit on
 * SQLite (docs/architecture.md, "Known traps in the stack").
 * The work gets a Knex instance of its own (made only if the work uses more than the driver-level
 * helpers: see lendTo in storage/lentKnex.ts), which runs every statement
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
 * there, and the transaction rolls back. A request's write (idempotency/writes.ts) is instead a
 * member of its organization's shared transaction of this turn (storage/pgGroupCommit.ts):
 * beginWriteTransaction on the handle that write gets answers that member.
 */
export type { WriteTransaction } from './lentKnex';

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
  if (isLent(db)) throw new Error('Write transactions do not nest: this Knex instance belongs to an open write transaction.');
  // a request's write on Postgres: a member of this turn's shared transaction (storage/pgGroupCommit.ts)
  const member = await joinBatchOf(db);
  if (member !== undefined) return member;
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

class DriverTransaction extends LendingTransaction {
  constructor(
    private readonly pool: ConnectionPool,
    private readonly conn: Connection,
    lent: LentKnex,
    private readonly pg: boolean,
  ) {
    super(lent);
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
      await rollBackAndRelease(this.pool, this.conn as PgConnection);
      throw err;
    }
    endPipelining(this.conn as PgConnection);
    await this.pool.releaseConnection(this.conn);
  }

  async rollback(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    this.lent.end();
    if (this.pg) await rollBackAndRelease(this.pool, this.conn as PgConnection);
    else await leaveBatch(this.pool, this.conn as SqliteConnection, false);
  }

  /** SQLite only: Postgres' statements go through storage/pgPipeline.ts. */
  private async run(sql: string): Promise<void> {
    (this.conn as SqliteConnection).prepare(sql).run();
  }
}

