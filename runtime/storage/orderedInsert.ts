import { Knex } from 'knex';
import { Dialect, dialectOf } from './databaseErrors';
import { sendInTransaction } from './database';

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
 * before the row (and its seq) is formed. In a write transaction the statement is sent without
 * waiting for its answer (storage/database.ts, sendInTransaction), so the lock, the insert, the
 * event and the COMMIT reach Postgres together; its failure fails the COMMIT.
 */
export async function insertInOrder(db: Knex, table: string, orgId: string, row: Record<string, string | number | null>): Promise<void> {
  const columns = Object.keys(row);
  const values = columns.map((c) => row[c] ?? null);
  const dialect = dialectOf(db);
  await sendInTransaction(db, insertText(dialect, table, columns), dialect === 'postgres' ? [...values, table, orgId] : values);
}

/**
 * The insert's text, made once per (table, columns): it runs through the driver
 * (storage/database.ts) with `?` bindings, like the other statements of every write.
 * Table and column names come from the repositories' code, never from a request.
 */
const insertTexts = new Map<string, string>();
function insertText(dialect: Dialect, table: string, columns: string[]): string {
  const cacheKey = `${dialect}\n${table}\n${columns.join(',')}`;
  let text = insertTexts.get(cacheKey);
  if (text === undefined) {
    const names = columns.map((c) => `"${c}"`).join(', ');
    const marks = columns.map(() => '?').join(', ');
    text = dialect === 'sqlite'
      ? `insert into "${table}" (${names}) values (${marks})`
      : `insert into "${table}" (${names}) select ${marks}
     from (select pg_advisory_xact_lock(hashtext(?), hashtext(?)) offset 0) as ordered`;
    insertTexts.set(cacheKey, text);
  }
  return text;
}
