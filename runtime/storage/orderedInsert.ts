import { Knex } from 'knex';
import { dialectOf } from './databaseErrors';

/**
 * Makes the inserts of one organization into one listed table commit in `seq` order.
 *
 * Lists page by keyset on `seq` (pagination.ts), and docs/architecture.md ("Lists and cursors") promises that a walk
 * through all pages returns every item exactly once, even while items are added. On Postgres
 * `seq` is assigned at INSERT but becomes visible at COMMIT: if transaction A takes seq 10 and
 * B takes seq 11, B commits, a reader pages past 11, and then A commits, item 10 is never
 * returned. Taking a transaction-scoped advisory lock per (table, organization) before the
 * INSERT serializes those transactions, so a later seq can only become visible after every
 * earlier one (lists are always per organization). Call it inside the write's transaction,
 * right before the INSERT; the lock is released at COMMIT or ROLLBACK.
 *
 * SQLite has one writer at a time, so it cannot hit this race: no-op there.
 */
export async function lockForOrderedInsert(db: Knex, table: string, orgId: string): Promise<void> {
  if (dialectOf(db) !== 'postgres') return;
  await db.raw('select pg_advisory_xact_lock(hashtext(?), hashtext(?))', [table, orgId]);
}
