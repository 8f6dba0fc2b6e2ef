/**
 * What the write transactions of both databases use of Knex's connection pool
 * (storage/writeTransaction.ts, storage/sqliteGroupCommit.ts, storage/pgGroupCommit.ts, and
 * storage/pgPipeline.ts, which ends a failed Postgres transaction for both Postgres kinds).
 */

/** What they use of Knex's client: its pool. */
export interface ConnectionPool {
  acquireConnection(): Promise<unknown>;
  releaseConnection(conn: unknown): Promise<void>;
}

/**
 * Marks a connection that may still hold a transaction (its ROLLBACK failed) so that Knex's pool
 * discards it when it is given back instead of handing it out again (other statements would join
 * that transaction): the pool's own mark for a broken connection (its `connectionIsDisposed`).
 */
export function discardFromPool(conn: object, cause: unknown): void {
  (conn as { __knex__disposed?: unknown }).__knex__disposed = cause;
}
