import fs from 'node:fs';
import path from 'node:path';
import knex, { Knex } from 'knex';

import { Dialect } from './databaseErrors';
export type { Dialect };

export interface Database {
  knex: Knex;
  dialect: Dialect;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Postgres only: the schema every query uses (tests get a fresh one per test file). */
  schema?: string;
  /** Postgres only: pool size (default 10). */
  poolMax?: number;
}

/**
 * Opens the database named by a DATABASE_URL: `sqlite:relative/file.sqlite`,
 * `sqlite:///absolute/file.sqlite` or `postgres://…`.
 */
export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  if (url.startsWith('sqlite:')) {
    const filename = sqliteFilename(url);
    if (filename !== ':memory:') fs.mkdirSync(path.dirname(filename), { recursive: true });
    const db = knex({
      client: 'better-sqlite3',
      connection: { filename },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: 1,
        afterCreate(conn: any, done: (err: Error | null, conn: unknown) => void) {
          try {
            // WAL lets readers in other processes work during a write; busy_timeout makes a
            // second process (or the key CLI) wait for the write lock instead of failing.
            conn.pragma('journal_mode = WAL');
            conn.pragma('busy_timeout = 5000');
            conn.pragma('foreign_keys = ON');
            conn.pragma('synchronous = NORMAL');
            done(null, conn);
          } catch (err) {
            done(err as Error, conn);
          }
        },
      },
    });
    return { knex: db, dialect: 'sqlite', close: () => db.destroy() };
  }
  const db = knex({
    client: 'pg',
    connection: url,
    searchPath: options.schema ? [options.schema] : undefined,
    pool: { min: 0, max: options.poolMax ?? 10 },
  });
  return { knex: db, dialect: 'postgres', close: () => db.destroy() };
}

function sqliteFilename(url: string): string {
  const rest = url.slice('sqlite:'.length);
  if (rest === ':memory:') return rest;
  if (rest.startsWith('//')) return rest.slice(2); // sqlite:///abs/path → /abs/path
  return path.resolve(rest);
}
