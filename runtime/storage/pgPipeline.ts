/**
 * Postgres write transactions send the statements whose answer the code does not need before it
 * goes on (BEGIN, a SAVEPOINT, the event of a write, the stored answer of an Idempotency-Key)
 * without waiting for that answer: they travel with the next statement that needs one, or with
 * COMMIT. node-postgres' pipeline mode (`pipeline: true`, set in storage/database.ts) writes a
 * query while earlier ones are unanswered, and Postgres answers them in order. A keyed log
 * write waits for two round trips instead of seven, an unkeyed one for one instead of four
 * (docs/architecture.md, "Postgres round trips"). The statements sent without waiting stay in
 * the socket's buffer (corked) until the statement that waits is written behind them, or the
 * end of the turn of the event loop: one system call for all of them.
 *
 * Each statement still succeeds or fails on its own; in a transaction, a failure aborts it, every
 * later statement of the transaction fails, and its COMMIT rolls back. So a statement sent this
 * way can never be committed without its own success: its error is answered, in order, by the
 * next statement that waits (or the COMMIT), and the transaction rolls back.
 *
 * The list is per connection and exists only while one of our write transactions holds that
 * connection (storage/writeTransaction.ts and storage/pgGroupCommit.ts open and close it); it is
 * this process's own bookkeeping of its sockets, never shared state.
 */

import type { Client, QueryConfig, QueryResult } from 'pg';
import { discardFromPool, type ConnectionPool } from './connectionPool';

/** A node-postgres client, as Knex's pool hands it out. */
export type PgClient = Client;
type Query = string | QueryConfig;

/** Per connection in a write transaction: what each statement sent without waiting failed with (undefined: it succeeded). */
const unanswered = new WeakMap<PgClient, Promise<unknown>[]>();

/** The transaction on `conn` sends statements without waiting from now on, until `endPipelining`. */
export function startPipelining(conn: PgClient): void {
  unanswered.set(conn, []);
}

/** The connections whose socket this module corked (nothing written since has gone out yet). */
const corked = new WeakSet<PgClient>();

function cork(conn: PgClient): void {
  if (corked.has(conn)) return;
  conn.connection.stream.cork();
  corked.add(conn);
  // at the latest at the end of this turn of the event loop: a statement that waits and is not
  // written by this module (Knex's own, through the transaction's instance) may be written
  // behind the corked ones by another user of the connection (a batch member,
  // storage/pgGroupCommit.ts), and must not stay in the buffer
  setImmediate(uncork, conn);
}

/** Writes out what was sent without waiting (and the statement written after it, if any). */
function uncork(conn: PgClient): void {
  if (!corked.delete(conn)) return;
  conn.connection.stream.uncork();
}

/** Whether `conn` is held by a write transaction that sends statements without waiting. */
export function isPipelining(conn: PgClient): boolean {
  return unanswered.has(conn);
}

/** The transaction ended: nothing is sent without waiting on `conn` any more. */
export function endPipelining(conn: PgClient): void {
  uncork(conn);
  unanswered.delete(conn);
}

/**
 * Sends `query` now and goes on without its answer; its failure (as `mapError` makes it) is
 * thrown by the next statement that waits on `conn`. Only while `conn` is pipelining.
 */
export function sendWithoutWaiting(conn: PgClient, query: Query, mapError: (err: unknown) => unknown = (err) => err): void {
  const list = unanswered.get(conn);
  if (list === undefined) throw new Error('sendWithoutWaiting: the connection is not in a write transaction.');
  // stays in the socket's buffer until a statement that waits is written (uncork below)
  cork(conn);
  // handled at once: an answer nobody waits for (a rolled-back transaction) must not surface as
  // an unhandled rejection
  list.push(conn.query(query).then(() => undefined, mapError));
}

/**
 * Sends `query` and answers its result, after the answers of the statements sent before it
 * without waiting (one round trip for all of them). When one of those failed, throws the first
 * such failure instead: `query` itself then failed or ran in an aborted transaction.
 */
export async function queryInOrder(conn: PgClient, query: Query): Promise<QueryResult> {
  const earlier = takeUnanswered(conn);
  if (earlier.length === 0) return conn.query(query);
  const own = conn.query(query);
  uncork(conn);
  const failure = await firstFailure(earlier);
  if (failure !== undefined) {
    own.catch(() => undefined);
    throw failure;
  }
  return own;
}

/**
 * Sends `query` and waits for it, ignoring what the statements sent before it without waiting
 * failed with: for ROLLBACK and ROLLBACK TO SAVEPOINT, which undo their work whatever it was.
 */
export async function queryDiscardingEarlier(conn: PgClient, query: string): Promise<QueryResult> {
  const earlier = takeUnanswered(conn);
  const own = conn.query(query);
  uncork(conn);
  await Promise.all(earlier);
  return own;
}

/**
 * Ends the transaction open on `conn` keeping nothing, and gives `conn` back to `pool`; never
 * throws. Answers whether the ROLLBACK succeeded: if it did, nothing of the transaction was kept
 * (a COMMIT that reached Postgres before it had rolled back); if not, the connection may still
 * hold the transaction, and the pool discards it instead of handing it out again.
 */
export async function rollBackAndRelease(pool: ConnectionPool, conn: PgClient): Promise<boolean> {
  let rolledBack = false;
  try {
    await queryDiscardingEarlier(conn, 'ROLLBACK');
    rolledBack = true;
  } catch (err) {
    discardFromPool(conn, err);
  }
  endPipelining(conn);
  await pool.releaseConnection(conn);
  return rolledBack;
}

/** Waits for the statements sent without waiting on `conn`; throws the first one's failure. */
export async function awaitUnanswered(conn: PgClient): Promise<void> {
  uncork(conn);
  const failure = await firstFailure(takeUnanswered(conn));
  if (failure !== undefined) throw failure;
}

function takeUnanswered(conn: PgClient): Promise<unknown>[] {
  const list = unanswered.get(conn);
  if (list === undefined || list.length === 0) return [];
  unanswered.set(conn, []);
  return list;
}

async function firstFailure(answers: Promise<unknown>[]): Promise<unknown> {
  return (await Promise.all(answers)).find((failure) => failure !== undefined);
}
