import { Knex } from 'knex';
import { deleteExpiredBatch } from '../storage/repositories/idempotencyKeysRepository';

/**
 * Deletes expired rows in batches of `batch` (each delete is short, so a SQLite write lock or a
 * Postgres row lock is held only briefly) until none is left or `maxBatches` ran, yielding to
 * requests between batches; returns how many. One run per timer tick must keep up with any
 * traffic, so it does not stop after one batch. A row still held by a live lease is kept even
 * when expired: deleting it would make its running operation fail to commit.
 */
export async function purgeExpiredIdempotencyKeys(db: Knex, batch = 1000, maxBatches = 1000): Promise<number> {
  const now = new Date().toISOString();
  let total = 0;
  for (let round = 0; round < maxBatches; round++) {
    const deleted = await deleteExpiredBatch(db, now, batch);
    total += deleted;
    if (deleted < batch) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}
