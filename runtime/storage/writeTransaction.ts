import { Knex } from 'knex';

/**
 * Runs `work` in one database transaction that is going to write.
 *
 * SQLite: a transaction that reads first and writes later can fail with SQLITE_BUSY when
 * another connection (a second server process, the key CLI) committed in between;
 * busy_timeout does not cover that case. So every transaction on SQLite begins with
 * `BEGIN IMMEDIATE` (storage/database.ts), which waits for the write lock up front. (Earlier
 * releases took it with a first write to the one-row `_write_lock` table, which stays.)
 */
export async function inWriteTransaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction(work);
}
