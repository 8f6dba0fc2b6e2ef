import { Knex } from 'knex';

export type Dialect = 'sqlite' | 'postgres';

/** The dialect of a Knex instance or transaction. */
export function dialectOf(db: Knex): Dialect {
  return db.client.config.client === 'pg' ? 'postgres' : 'sqlite';
}

/**
 * A write refused by a unique index, the same on SQLite and Postgres. Repositories throw it in
 * place of the driver's error; the domain decides what it means for the client (usually 409
 * ALREADY_EXISTS). Under Postgres the transaction is aborted by then and must roll back.
 */
export class UniqueViolation extends Error {
  constructor(readonly table: string, readonly cause: unknown) {
    super(`unique index of ${table} refused the write`);
  }
}

/** Runs `write`, translating a unique-index refusal of the driver into UniqueViolation. */
export async function translateErrors<T>(db: Knex, table: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(db, err)) throw new UniqueViolation(table, err);
    throw err;
  }
}

/** True when `err` is a driver's unique-index refusal (per dialect). */
export function isUniqueViolation(db: Knex, err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  if (dialectOf(db) === 'postgres') return code === '23505';
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
