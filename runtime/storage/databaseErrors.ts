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

/**
 * True when `err` says the database cannot be reached right now (connection refused, reset or
 * timed out, no pool connection within the acquire timeout, the server shutting down or out of
 * connections), as opposed to an error of the statement itself. Such a request answers
 * 503 SERVICE_UNAVAILABLE and is safe to retry; the pool reconnects by itself.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const e = err as { name?: string; code?: string; message?: string };
  if (e.name === 'KnexTimeoutError') return true;
  if (e.code && NETWORK_CODES.has(e.code)) return true;
  // SQLSTATE class 08 (connection exception), 57P01–57P03 (shutdown, cannot connect now), 53300 (too many connections)
  if (e.code && /^(08...|57P0[123]|53300)$/.test(e.code)) return true;
  // node-postgres reports a dropped connection by message only, a connection attempt that got
  // no answer within connectionTimeoutMillis (a host that accepts and hangs) as "timeout expired",
  // and a statement unanswered within query_timeout (storage/database.ts) as "Query read timeout"
  return typeof e.message === 'string' && /Connection terminated|connection timeout|Client has encountered a connection error|Connection is closed|Connection ended unexpectedly|^timeout expired$|^Query read timeout$/i.test(e.message);
}

/**
 * True when the database gave up on the statement for now rather than refusing it: a statement
 * or lock timeout (isWaitGivenUp), a serialization
 * failure or a deadlock (40001, 40P01), SQLite's lock still held after its busy timeout. The
 * transaction was rolled back whole, so the request is answered 503 and is safe to retry, as for
 * an unreachable database.
 */
export function isDatabaseBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return isWaitGivenUp(err) || (typeof code === 'string' && /^(40001|40P01|SQLITE_BUSY(_\w+)?)$/.test(code));
}

/**
 * A statement Postgres gave up on after waiting: `statement_timeout` (57014, which the server sets
 * a little under DATABASE_QUERY_TIMEOUT_SECONDS: storage/database.ts) or `lock_timeout` (55P03).
 * Run again, the write would wait as long again (storage/pgGroupCommit.ts). A deadlock or a
 * serialization failure is not one: run again, the write usually passes.
 */
export function isWaitGivenUp(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '57014' || code === '55P03';
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
