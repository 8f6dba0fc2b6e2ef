import { discardFromPool, type ConnectionPool } from './connectionPool';

/**
 * Group commit for the write transactions of one SQLite connection.
 *
 * On SQLite a commit's cost is mostly the pages it writes to the WAL: each page a transaction
 * changed (the row's page and one page per index it touched) is written whole, with its frame
 * header, at every commit — even when the transaction before changed the same page. A write
 * request changes a dozen pages (its resource and indexes, its event and the event's indexes,
 * its Idempotency-Key row), and most of them are the same pages as the next request's: the ends
 * of the same indexes. So the write transactions that run in the same turn of the event loop
 * (the requests that arrived together) share one database transaction and commit together:
 *
 * - The first write transaction begins the batch (`BEGIN IMMEDIATE`). Each write transaction is
 *   a member: its work runs inside `SAVEPOINT write_member`, so a member that fails rolls back
 *   its own work only (`ROLLBACK TO`), never the others'.
 * - A member that finishes releases its savepoint and gives the connection back with the batch
 *   still open. The batch commits at the end of the current turn of the event loop (setImmediate),
 *   once the requests that arrived together have run — their write transactions join it — or
 *   at once when it has MAX_BATCH members. A statement of better-sqlite3 runs to its end within a
 *   turn, so at that moment no member is half done; if one is inside its work (it awaited
 *   something other than the database), it commits the batch when it leaves.
 * - A member is answered once the batch's COMMIT has returned: `commit()` of a write transaction
 *   resolves only when its work is in the database, as before. When the COMMIT fails, every
 *   member's `commit()` throws, and none of their work is kept.
 * - So a caller must not hold a write transaction open while it waits for another one's commit:
 *   the batch of the one it waits for cannot commit while the one it holds is inside it. (With
 *   one connection, it could not begin while holding one either.) Nothing in the server does.
 *
 * What a reader on the same connection sees: the connection is the process' only one (the pool
 * holds one), so a statement that is not a write transaction (a read by id, the key lookup, a
 * key's `last_used_at`) and runs while a batch is open runs inside the batch: it reads the
 * members' work a few milliseconds before their commit, and a write of it commits with the batch.
 * If that COMMIT then fails (a full disk, an I/O error), that work was never stored. A write that
 * must be stored before the caller goes on (the Idempotency-Key's claim) is therefore a write
 * transaction of its own. Other processes and the checkpoint thread see committed data only.
 *
 * Postgres is not batched: each write transaction commits on its own connection
 * (storage/writeTransaction.ts).
 */

/** What this module uses of a better-sqlite3 connection (its prepare is the statement cache's). */
export interface SqliteConnection {
  prepare(sql: string): { run(): unknown };
  readonly inTransaction: boolean;
}

/** At most this many write transactions commit together (bounds how long a member waits). */
export const MAX_BATCH = 16;

const MEMBER = 'write_member';

class Batch {
  /** Members whose work is kept, waiting for the COMMIT. */
  readonly waiting: { resolve(): void; reject(err: unknown): void }[] = [];
  /** A member is between its SAVEPOINT and its RELEASE: the batch cannot commit now. */
  memberInside = false;
  /** The commit at the end of this turn of the event loop is scheduled. */
  commitScheduled = false;
  /** That commit came while a member was inside: the member commits when it leaves. */
  commitDue = false;

  constructor(readonly conn: SqliteConnection) {}
}

const batches = new WeakMap<object, Batch>();
/** The open batches of this process, on any connection. */
const openBatches = new Set<Batch>();

/**
 * Called before every statement on a SQLite connection (storage/database.ts, the statement
 * cache): commits the batches open on this process' other connections to the same or another
 * file, unless a member is inside its work. A server process has one connection, so this finds
 * nothing there; but where one process holds two (an app and another one on the same file, in
 * the tests), a statement that needs the write lock while another connection's batch holds it
 * would wait synchronously, on the very thread that is to commit that batch, until busy_timeout
 * ran out.
 */
export function commitOtherBatches(conn: object): void {
  if (openBatches.size === 0 || committingOthers) return;
  // not re-entered: the COMMIT below is itself a statement through the cache, on the other
  // connection, and must not in turn commit this connection's batch under a member that is
  // about to release its savepoint
  committingOthers = true;
  try {
    for (const batch of openBatches) if (batch.conn !== conn && !batch.memberInside) commitBatch(batch);
  } finally {
    committingOthers = false;
  }
}
let committingOthers = false;

/**
 * Makes the caller a member of the connection's batch — the open one, or a new one begun with
 * `BEGIN IMMEDIATE` (which waits for the write lock up to busy_timeout, or throws). The caller
 * holds the connection from the pool and ends with leaveBatch.
 */
export function enterBatch(conn: SqliteConnection): void {
  let batch = batches.get(conn);
  if (batch !== undefined && !conn.inTransaction) {
    endBatch(batch, new Error('The SQLite transaction of this group commit ended before its COMMIT.'));
    batch = undefined;
  }
  if (batch === undefined) {
    conn.prepare('BEGIN IMMEDIATE').run();
    batch = new Batch(conn);
    batches.set(conn, batch);
    openBatches.add(batch);
  }
  try {
    conn.prepare(`SAVEPOINT ${MEMBER}`).run();
  } catch (err) {
    if (!batch.waiting.length) endBatch(batch, err);
    throw err;
  }
  batch.memberInside = true;
}

/**
 * Ends the caller's membership: keeps its work (`kept`) or rolls it back, then gives the
 * connection back. With `kept`, resolves once the batch's COMMIT has returned — at the end of
 * this turn of the event loop, or at once when the batch is full — and throws when it failed.
 * Without, never throws.
 */
export async function leaveBatch(pool: ConnectionPool, conn: SqliteConnection, kept: boolean): Promise<void> {
  const batch = batches.get(conn);
  let committed: Promise<void> | undefined;
  try {
    if (batch === undefined) throw new Error('This connection has no open group commit.');
    // the member stays inside until its savepoint is gone: nothing may commit the batch between
    if (kept) {
      conn.prepare(`RELEASE ${MEMBER}`).run();
      committed = new Promise<void>((resolve, reject) => batch.waiting.push({ resolve, reject }));
    } else {
      conn.prepare(`ROLLBACK TO ${MEMBER}`).run();
      conn.prepare(`RELEASE ${MEMBER}`).run();
    }
    batch.memberInside = false;
  } catch (err) {
    // the savepoint is gone: SQLite ended the whole transaction (a full disk, an I/O error), and
    // every member's work with it
    if (batch !== undefined) endBatch(batch, err);
    else discardIfInTransaction(conn, err);
    await pool.releaseConnection(conn);
    if (kept) throw err;
    return;
  }
  if (!batch.waiting.length) {
    // nothing to keep (the only member rolled back): end it here rather than commit nothing
    endBatch(batch, undefined);
  } else if (batch.commitDue || batch.waiting.length >= MAX_BATCH) {
    commitBatch(batch);
  } else if (!batch.commitScheduled) {
    batch.commitScheduled = true;
    setImmediate(commitAtEndOfTurn, batch);
  }
  await pool.releaseConnection(conn);
  await committed;
}

/**
 * The batch's commit, once the requests of this turn of the event loop have run: straight on the
 * connection, which no member is using then (a statement of better-sqlite3 runs to its end
 * within one turn) — or, if a member is inside its work, by that member when it leaves.
 */
function commitAtEndOfTurn(batch: Batch): void {
  if (batches.get(batch.conn) !== batch) return; // committed already (full), or ended
  if (batch.memberInside) batch.commitDue = true;
  else commitBatch(batch);
}

function commitBatch(batch: Batch): void {
  batches.delete(batch.conn);
  openBatches.delete(batch);
  try {
    batch.conn.prepare('COMMIT').run();
  } catch (err) {
    // SQLite keeps a transaction whose COMMIT failed open: end it, keeping nothing. (A connection
    // closed meanwhile — the database closed abruptly — rolled it back itself.)
    discardIfInTransaction(batch.conn, err);
    for (const member of batch.waiting.splice(0)) member.reject(err);
    return;
  }
  for (const member of batch.waiting.splice(0)) member.resolve();
}

/** Rolls the batch back, keeping nothing; its members' commits throw `err`. */
function endBatch(batch: Batch, err: unknown): void {
  batches.delete(batch.conn);
  openBatches.delete(batch);
  discardIfInTransaction(batch.conn, err);
  for (const member of batch.waiting.splice(0)) member.reject(err ?? new Error('The group commit was rolled back.'));
}

/** Rolls back whatever transaction the connection has open; when that fails, the pool discards it. */
function discardIfInTransaction(conn: SqliteConnection, cause: unknown): void {
  try {
    if (conn.inTransaction) conn.prepare('ROLLBACK').run();
  } catch (err) {
    discardFromPool(conn, err ?? cause);
  }
}
