import knex, { Knex } from 'knex';
import { closeWithHandle } from './closeWithHandle';
import { dialectOf } from './databaseErrors';

/**
 * A handle on `db` that reads committed data only, for the change feed (and reading one event),
 * whose walk must never skip an event.
 *
 * On SQLite the server's one connection runs inside the open group commit
 * (storage/sqliteGroupCommit.ts): a statement on it sees the batch's work a few milliseconds
 * before its COMMIT. If that COMMIT fails (a full disk, an I/O error), the work is gone — for the
 * feed, an event that was read but never was, and whose `seq` the next event then takes (the
 * AUTOINCREMENT counter rolls back with it): a client resuming after it would skip that event.
 * So on SQLite the feed reads through a second, read-only connection to the same file, which
 * sees the last committed state (WAL: it never waits for the writer, nor the writer for it).
 * Made on first use, closed with `db`. Postgres connections read committed data already (and
 * an in-memory SQLite database has only its one connection): `db` itself.
 */
export function committedReads(db: Knex): Knex {
  if (dialectOf(db) === 'postgres') return db;
  // a write transaction's own handle (storage/writeTransaction.ts) has no pool: its caller reads
  // inside that transaction on purpose; a destroyed instance has none either
  if (!(db.client as { pool?: unknown }).pool) return db;
  const connection = db.client.config.connection as { filename?: string } | undefined;
  const filename = connection?.filename;
  if (!filename || filename === ':memory:') return db;
  let reader = readers.get(db);
  if (reader === undefined) {
    const opened = knex({
      client: 'better-sqlite3',
      connection: { filename, options: { readonly: true } },
      useNullAsDefault: true,
      pool: {
        min: 0,
        max: 1,
        afterCreate(conn: { pragma(sql: string): unknown }, done: (err: Error | null, conn: unknown) => void) {
          try {
            conn.pragma('busy_timeout = 5000');
            done(null, conn);
          } catch (err) {
            done(err as Error, conn);
          }
        },
      },
    });
    reader = opened;
    readers.set(db, opened);
    closeWithHandle(db.client, async () => {
      readers.delete(db);
      await opened.destroy();
    });
  }
  return reader;
}

const readers = new WeakMap<Knex, Knex>();
