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

/**
 * Inserts one row of an organization into a listed table behind lockForOrderedInsert's lock.
 * On Postgres the lock and the insert are one statement: the lock is held until COMMIT and
 * serializes the organization's writers of this table, so every round trip after taking it is
 * paid by all of them. `offset 0` keeps the locking subquery a plan node of its own, evaluated
 * before the row (and its seq) is formed.
 */
export async function insertInOrder(db: Knex, table: string, orgId: string, row: Record<string, unknown>): Promise<void> {
  if (dialectOf(db) !== 'postgres') {
    await db(table).insert(row);
    return;
  }
  const columns = Object.keys(row);
  await db.raw(
    `insert into ?? (${columns.map(() => '??').join(', ')}) select ${columns.map(() => '?').join(', ')}
     from (select pg_advisory_xact_lock(hashtext(?), hashtext(?)) offset 0) as ordered`,
    [table, ...columns, ...columns.map((c) => (row[c] ?? null) as Knex.Value), table, orgId],
  );
}
