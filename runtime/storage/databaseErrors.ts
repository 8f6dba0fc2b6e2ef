import { Knex } from 'knex';

export type Dialect = 'sqlite' | 'postgres';

/** The dialect of a Knex instance or transaction. */
export function dialectOf(db: Knex): Dialect {
  return db.client.config.client === 'pg' ? 'postgres' : 'sqlite';
}

/**
 * Database errors translated at the storage boundary, per dialect, so SQLite and Postgres
 * give the same domain answer (style.md habit 4). Repositories call this; handlers never see
 * a driver error.
 */
export function isUniqueViolation(db: Knex, err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  if (dialectOf(db) === 'postgres') return code === '23505';
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
