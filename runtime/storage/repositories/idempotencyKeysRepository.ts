import { Knex } from 'knex';
import type { Reply } from '../../reply';
import { runStatement, selectRows, sendInTransaction, writeReturning } from '../database';
import { dialectOf } from '../databaseErrors';
import { noteChange } from '../lentKnex';

/**
 * The SQL of the `idempotency_keys` table. The claim state machine, its decisions and its
 * errors live in runtime/idempotency/claim.ts; these functions only run its statements.
 */

export interface IdempotencyRow {
  api_key_id: string;
  idempotency_key: string;
  fingerprint: string;
  state: 'in_progress' | 'completed';
  lock_token: string | null;
  locked_until: string | null;
  response_status: number | null;
  response_headers: string | null;
  response_body: string | null;
  created_at: string;
  expires_at: string;
}

/**
 * Inserts the claim unless a row for (api key, key) exists already (ON CONFLICT DO NOTHING);
 * true when this statement inserted it (RETURNING answers nothing on a conflict), so the
 * common case needs no read-back.
 */
export async function insertClaimIfAbsent(db: Knex, row: IdempotencyRow): Promise<boolean> {
  const inserted = await writeReturning(db, INSERT_CLAIM_SQL, [
    row.api_key_id, row.idempotency_key, row.fingerprint, row.state, row.lock_token, row.locked_until,
    row.response_status, row.response_headers, row.response_body, row.created_at, row.expires_at,
  ]);
  return inserted.length === 1;
}

export async function findIdempotencyKey(db: Knex, apiKeyId: string, key: string): Promise<IdempotencyRow | undefined> {
  const [row] = await selectRows<IdempotencyRow>(db, FIND_SQL, [apiKeyId, key]);
  return row;
}

// The statements of every keyed write, as fixed texts run through the driver (storage/database.ts,
// selectRows): Knex's builder and runner cost more than these one-row statements themselves.
const INSERT_CLAIM_SQL = `insert into idempotency_keys (api_key_id, idempotency_key, fingerprint, state, lock_token, locked_until,
  response_status, response_headers, response_body, created_at, expires_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
  on conflict (api_key_id, idempotency_key) do nothing returning lock_token`;
const FIND_SQL = `select api_key_id, idempotency_key, fingerprint, state, lock_token, locked_until, response_status,
  response_headers, response_body, created_at, expires_at from idempotency_keys where api_key_id = ? and idempotency_key = ? limit 1`;
const COMPLETE_SQL = `update idempotency_keys set state = 'completed', lock_token = null, locked_until = null,
  response_status = ?, response_headers = ?, response_body = ?
  where api_key_id = ? and idempotency_key = ? and state = 'in_progress' and lock_token = ?`;

/**
 * Replaces an expired row by a fresh claim. Fenced on the row seen (its created_at, lock token
 * and lease), so that of two retries racing for it only one wins and a lease renewed meanwhile
 * is not overwritten. Returns how many rows changed.
 */
export async function takeOverExpired(
  db: Knex,
  apiKeyId: string,
  key: string,
  seen: Pick<IdempotencyRow, 'created_at' | 'lock_token' | 'locked_until'>,
  fresh: IdempotencyRow,
): Promise<number> {
  return db('idempotency_keys')
    .where({ api_key_id: apiKeyId, idempotency_key: key, created_at: seen.created_at, lock_token: seen.lock_token, locked_until: seen.locked_until })
    .update({ ...fresh });
}

/**
 * Takes over an in-progress claim whose lease ran out, fenced on the lock token and the lease
 * seen: when the owner renewed its lease meanwhile, it is alive and nothing changes. Returns
 * how many rows changed.
 */
export async function takeOverStaleLease(
  db: Knex,
  apiKeyId: string,
  key: string,
  seen: Pick<IdempotencyRow, 'lock_token' | 'locked_until'>,
  token: string,
  lockedUntil: string,
): Promise<number> {
  return db('idempotency_keys')
    .where({ api_key_id: apiKeyId, idempotency_key: key, state: 'in_progress', lock_token: seen.lock_token, locked_until: seen.locked_until })
    .update({ lock_token: token, locked_until: lockedUntil });
}

export interface HeldClaim {
  apiKeyId: string;
  key: string;
  token: string;
}

/**
 * Extends the lease of the in-progress claims still holding their token to `lockedUntil`, and
 * returns the tokens of those still held (a claim that completed or was taken over is not).
 */
export async function renewLeases(trx: Knex, claims: HeldClaim[], lockedUntil: string): Promise<Set<string>> {
  const held = (q: Knex.QueryBuilder) =>
    q
      .whereIn(['api_key_id', 'idempotency_key'], claims.map((c) => [c.apiKeyId, c.key]))
      .whereIn('lock_token', claims.map((c) => c.token))
      .where('state', 'in_progress');
  await held(trx('idempotency_keys')).update({ locked_until: lockedUntil });
  const rows: { lock_token: string }[] = await held(trx('idempotency_keys').select('lock_token'));
  return new Set(rows.map((r) => r.lock_token));
}

/**
 * Postgres: takes the transaction-level advisory lock of (API key, Idempotency-Key) without
 * waiting (`locked: false` when another transaction holds it), and under it does what
 * findIdempotencyKey and insertClaimIfAbsent do, in one round trip. The lock ends with the
 * transaction, and so with the connection of a process that died; its 64-bit key is derived from
 * the schema, the API key id and the key (ADVISORY_LOCK_KEY_SQL). The row is
 * read and `fresh` inserted only when the lock was taken, so nobody else is deciding about the
 * key meanwhile. No row yet: `fresh` is inserted (`inserted: true`, `row` undefined). A row:
 * answered as found, for the caller's decisions (replay, reuse, expiry, a lapsed lease).
 */
export async function tryLockAndClaimKey(trx: Knex, fresh: IdempotencyRow): Promise<{ locked: boolean; inserted: boolean; row: IdempotencyRow | undefined }> {
  const [result] = await selectRows<{ locked: boolean; inserted: number | string } & Partial<IdempotencyRow>>(trx, TRY_LOCK_AND_CLAIM_SQL, [
    fresh.api_key_id, fresh.idempotency_key,
    fresh.api_key_id, fresh.idempotency_key, fresh.fingerprint, fresh.state, fresh.lock_token, fresh.locked_until,
    fresh.response_status, fresh.response_headers, fresh.response_body, fresh.created_at, fresh.expires_at,
    fresh.api_key_id, fresh.idempotency_key,
  ]);
  const { locked, inserted, ...row } = result;
  // a write only when it inserted (storage/lentKnex.ts counts what a transaction may have changed);
  // one that never waits: the key's lock was tried, and whoever holds it inserts the row
  if (Number(inserted) === 1) noteChange(trx, false);
  return { locked: locked === true, inserted: Number(inserted) === 1, row: row.api_key_id == null ? undefined : (row as IdempotencyRow) };
}

/** The advisory lock key of (API key id, Idempotency-Key) as SQL with two bindings, in that order. */
export const ADVISORY_LOCK_KEY_SQL = `('x' || substr(md5(current_schema() || chr(10) || ? || chr(10) || ?), 1, 16))::bit(64)::bigint`;


export interface IdempotencyResponseColumns {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * Marks the claim completed with its response, inside the operation's transaction. Fenced on the
 * lock token: when the claim was taken over meanwhile, nothing changes and `lost()` is thrown,
 * and the transaction must not commit. On Postgres the statement is sent without waiting
 * (storage/database.ts, sendInTransaction) and fails by itself when it completed no row (it
 * divides by the number it completed), so that the COMMIT sent behind it rolls back; `lost()` is
 * then thrown by that COMMIT.
 */
export async function completeIdempotencyKey(
  trx: Knex,
  apiKeyId: string,
  key: string,
  token: string,
  response: Reply,
  lost: () => Error,
): Promise<void> {
  const bindings = [
    response.status,
    JSON.stringify(response.headers ?? {}),
    response.body === undefined ? null : JSON.stringify(response.body),
    apiKeyId,
    key,
    token,
  ];
  if (dialectOf(trx) === 'postgres') {
    await sendInTransaction(trx, COMPLETE_OR_FAIL_SQL, bindings, (err) => ((err as { code?: string }).code === DIVISION_BY_ZERO ? lost() : err));
    return;
  }
  if ((await runStatement(trx, COMPLETE_SQL, bindings)) !== 1) throw lost();
}

const DIVISION_BY_ZERO = '22012';
const COMPLETE_OR_FAIL_SQL = `with completed as (${COMPLETE_SQL} returning 1)
  select 1 / count(*) as fenced from completed`;

/** Deletes an in-progress claim still holding `token`. */
export async function deleteClaim(db: Knex, apiKeyId: string, key: string, token: string): Promise<void> {
  await db('idempotency_keys').where({ api_key_id: apiKeyId, idempotency_key: key, state: 'in_progress', lock_token: token }).delete();
}

/**
 * Deletes up to `batch` rows expired at `now`; returns how many. A row still held by a live
 * lease is kept even when expired: deleting it would make its running operation fail to commit.
 */
export async function deleteExpiredBatch(db: Knex, now: string, batch: number): Promise<number> {
  const purgeable = (q: Knex.QueryBuilder) =>
    q.where('expires_at', '<=', now).andWhere((held) => held.where('state', 'completed').orWhereNull('locked_until').orWhere('locked_until', '<=', now));
  const expired = purgeable(db('idempotency_keys').select('api_key_id', 'idempotency_key')).limit(batch);
  // the conditions are repeated on the delete itself: when a row changed under the statement
  // (claimed again), Postgres re-checks only those, so a fresh claim is never deleted
  const deleted: number = await purgeable(db('idempotency_keys').whereIn(['api_key_id', 'idempotency_key'], expired)).delete();
  return deleted;
}

// The lock (evaluated once: a CTE with a volatile function is materialized), the insert when the
// lock was taken, and the row as it was before the statement (a WITH's insert is not visible to
// the statement's own select). Prepared (storage/database.ts): every keyed write on Postgres runs it.
const TRY_LOCK_AND_CLAIM_SQL = `with l as (select pg_try_advisory_xact_lock(${ADVISORY_LOCK_KEY_SQL}) as locked offset 0),
  claimed as (
    insert into idempotency_keys (api_key_id, idempotency_key, fingerprint, state, lock_token, locked_until,
      response_status, response_headers, response_body, created_at, expires_at)
    select ?, ?, ?, ?, ?, ?, ?::integer, ?, ?, ?, ? from l where l.locked
    on conflict (api_key_id, idempotency_key) do nothing
    returning 1
  )
  select l.locked, (select count(*) from claimed) as inserted, k.api_key_id, k.idempotency_key, k.fingerprint, k.state, k.lock_token,
    k.locked_until, k.response_status, k.response_headers, k.response_body, k.created_at, k.expires_at
  from l left join idempotency_keys k on l.locked and k.api_key_id = ? and k.idempotency_key = ?`;
