import { Knex } from 'knex';
import type { Reply } from '../../reply';

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

/** Inserts the claim unless a row for (api key, key) exists already (ON CONFLICT DO NOTHING). */
export async function insertClaimIfAbsent(db: Knex, row: IdempotencyRow): Promise<void> {
  await db('idempotency_keys').insert(row).onConflict(['api_key_id', 'idempotency_key']).ignore();
}

export async function findIdempotencyKey(db: Knex, apiKeyId: string, key: string): Promise<IdempotencyRow | undefined> {
  return db('idempotency_keys').where({ api_key_id: apiKeyId, idempotency_key: key }).first();
}

/**
 * Replaces an expired row by a fresh claim. Fenced on the row seen (its created_at and lock
 * token), so that of two retries racing for it only one wins. Returns how many rows changed.
 */
export async function takeOverExpired(
  db: Knex,
  apiKeyId: string,
  key: string,
  seen: Pick<IdempotencyRow, 'created_at' | 'lock_token'>,
  fresh: IdempotencyRow,
): Promise<number> {
  return db('idempotency_keys')
    .where({ api_key_id: apiKeyId, idempotency_key: key, created_at: seen.created_at, lock_token: seen.lock_token })
    .update({ ...fresh });
}

/**
 * Takes over an in-progress claim whose lease ran out, fenced on the lock token seen. Returns
 * how many rows changed.
 */
export async function takeOverStaleLease(
  db: Knex,
  apiKeyId: string,
  key: string,
  seenLockToken: string | null,
  token: string,
  lockedUntil: string,
): Promise<number> {
  return db('idempotency_keys')
    .where({ api_key_id: apiKeyId, idempotency_key: key, state: 'in_progress', lock_token: seenLockToken })
    .update({ lock_token: token, locked_until: lockedUntil });
}

/**
 * Marks the claim completed with its response. Fenced on the lock token: when the claim was
 * taken over meanwhile, nothing changes. Returns how many rows changed.
 */
export async function completeIdempotencyKey(
  trx: Knex.Transaction,
  apiKeyId: string,
  key: string,
  token: string,
  response: Reply,
): Promise<number> {
  return trx('idempotency_keys')
    .where({ api_key_id: apiKeyId, idempotency_key: key, state: 'in_progress', lock_token: token })
    .update({
      state: 'completed',
      lock_token: null,
      locked_until: null,
      response_status: response.status,
      response_headers: JSON.stringify(response.headers ?? {}),
      response_body: response.body === undefined ? null : JSON.stringify(response.body),
    });
}

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
