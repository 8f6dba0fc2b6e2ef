import { Knex } from 'knex';
import { dialectOf } from './databaseErrors';

/**
 * Runs `work` in one database transaction that is going to write.
 *
 * SQLite: a transaction that reads first and writes later can fail with SQLITE_BUSY when
 * another connection (a second server process, the key CLI) committed in between;
 * busy_timeout does not cover that case. Taking the write lock with a first write makes the
 * transaction wait for the lock instead. `_write_lock` is a one-row table for exactly that.
 */
export async function inWriteTransaction<T>(db: Knex, work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return db.transaction(async (trx) => {
    if (dialectOf(db) === 'sqlite') await trx.raw('update _write_lock set n = n where id = 1');
    return work(trx);
  });
}
