import { Knex } from 'knex';
import { deleteExpiredBatch } from '../storage/repositories/idempotencyKeysRepository';
import type { PurgeOptions } from '../periodic';

/**
 * Deletes expired rows in batches of `batch` (each delete is short, so a SQLite write lock or a
 * Postgres row lock is held only briefly) until none is left (or `maxBatches` ran, or the process is `stopping`),
 * yielding to requests between batches; returns how many. One run must keep up with any traffic,
 * so by default it goes on until it has caught up: a cap per run would leave a table growing for
 * good once expired rows arrive faster than the cap per tick (periodic.ts starts no second run
 * while one is going). A row still held by a live lease is kept even when expired: deleting it
 * would make its running operation fail to commit.
 */
export async function purgeExpiredIdempotencyKeys(db: Knex, { batch = 1000, maxBatches = Infinity, stopping = () => false }: PurgeOptions = {}): Promise<number> {
  const now = new Date().toISOString();
  let total = 0;
  for (let round = 0; round < maxBatches && !stopping(); round++) {
    const deleted = await deleteExpiredBatch(db, now, batch);
    total += deleted;
    if (deleted < batch) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}
