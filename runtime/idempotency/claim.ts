import { randomBytes } from 'node:crypto';
import { Knex } from 'knex';
import type { Reply } from '../reply';
import { ApiError } from '../errors';
import { inWriteTransaction } from '../storage/writeTransaction';
import {
  completeIdempotencyKey,
  deleteClaim,
  findIdempotencyKey,
  IdempotencyRow,
  insertClaimIfAbsent,
  takeOverExpired,
  takeOverStaleLease,
} from '../storage/repositories/idempotencyKeysRepository';

/**
 * The claim on an Idempotency-Key and its lease: how a request takes a key, stores its answer
 * and lets go of it. Everything else of idempotency (the header, the store-or-release policy,
 * the purge) calls only the functions below, so the mechanism can change here alone.
 * docs/architecture.md, "Idempotency", has the rules and their reasons.
 *
 * All state is in the `idempotency_keys` table, so that any number of server processes on one
 * database behave as one:
 *
 * 1. claim: insert the row (ON CONFLICT DO NOTHING) and commit it on its own, before the
 *    operation runs — a concurrent duplicate sees the row at once and answers
 *    IDEMPOTENCY_IN_PROGRESS instead of waiting. The row carries the request fingerprint, a
 *    random lock token and a lease.
 * 2. run: the operation's writes and the stored response commit in one transaction whose last
 *    statement updates the row only if it still holds our lock token (fencing). A worker whose
 *    lease was taken over cannot commit; a crash leaves neither the writes nor the response.
 * 3. A claim whose lease ran out (its process died) is taken over by the next retry.
 *
 * Stored: every response the operation produced (2xx and its own 4xx). Not stored: requests
 * rejected before the operation ran, and 5xx — the claim is released so a retry runs again.
 */

export interface IdempotencySettings {
  ttlSeconds: number;
  leaseSeconds: number;
}

/** A reply as kept for replays: always with its headers (possibly none). */
export type StoredResponse = Reply & { headers: Record<string, string> };

export interface Claimed {
  kind: 'claimed';
  apiKeyId: string;
  key: string;
  token: string;
}

export type ClaimResult = Claimed | { kind: 'replay'; response: StoredResponse };

const isoIn = (now: number, seconds: number) => new Date(now + seconds * 1000).toISOString();

const reused = () => new ApiError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request (method, path or body). Use a new key for a new request; do not retry.');
const inProgress = () => new ApiError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed. Do not retry; fetch the resource or wait for the first request.');

/**
 * Claims `key` for this request, or answers what the request gets instead: the stored
 * response (replay), or 409 IDEMPOTENCY_KEY_REUSED / IDEMPOTENCY_IN_PROGRESS (thrown).
 * Each statement commits on its own.
 */
export async function claimIdempotencyKey(
  db: Knex,
  settings: IdempotencySettings,
  apiKeyId: string,
  key: string,
  requestFingerprint: string,
): Promise<ClaimResult> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const now = Date.now();
    const token = randomBytes(16).toString('hex');
    const fresh: IdempotencyRow = {
      api_key_id: apiKeyId,
      idempotency_key: key,
      fingerprint: requestFingerprint,
      state: 'in_progress',
      lock_token: token,
      locked_until: isoIn(now, settings.leaseSeconds),
      response_status: null,
      response_headers: null,
      response_body: null,
      created_at: new Date(now).toISOString(),
      expires_at: isoIn(now, settings.ttlSeconds),
    };
    await insertClaimIfAbsent(db, fresh);
    const row = await findIdempotencyKey(db, apiKeyId, key);
    if (!row) continue; // purged between the two statements: try again
    if (row.lock_token === token) return { kind: 'claimed', apiKeyId, key, token };

    const nowIso = new Date(now).toISOString();
    const leaseLive = row.state === 'in_progress' && row.locked_until !== null && row.locked_until > nowIso;
    if (row.expires_at <= nowIso) {
      // Retention is over: the key starts a new operation, whatever its body — but only once
      // nobody holds it, so that a retention shorter than a running operation never lets a
      // second run start beside the first.
      if (leaseLive) throw inProgress();
      const taken = await takeOverExpired(db, apiKeyId, key, row, fresh);
      if (taken) return { kind: 'claimed', apiKeyId, key, token };
      continue;
    }
    if (row.fingerprint !== requestFingerprint) throw reused();
    if (row.state === 'completed') {
      return {
        kind: 'replay',
        response: {
          status: Number(row.response_status),
          headers: JSON.parse(row.response_headers ?? '{}'),
          body: row.response_body === null ? undefined : JSON.parse(row.response_body),
        },
      };
    }
    if (leaseLive) throw inProgress();
    // the lease ran out: the process that held it died or stalls; take the claim over
    const taken = await takeOverStaleLease(db, apiKeyId, key, row.lock_token, token, isoIn(now, settings.leaseSeconds));
    if (taken) return { kind: 'claimed', apiKeyId, key, token };
  }
  throw inProgress();
}

/**
 * Stores the response inside the operation's transaction. Fenced on the lock token: when the
 * claim was taken over meanwhile, nothing is stored and the transaction must roll back.
 */
export async function storeIdempotentResponse(trx: Knex.Transaction, claim: Claimed, response: StoredResponse): Promise<void> {
  const updated = await completeIdempotencyKey(trx, claim.apiKeyId, claim.key, claim.token, response);
  if (updated !== 1) throw new LeaseLostError();
}

/** The claim was taken over by another request after our lease ran out: our work must not commit. */
export class LeaseLostError extends ApiError {
  constructor() {
    super('IDEMPOTENCY_IN_PROGRESS', 'The lease on this Idempotency-Key ran out and another request took it over. Do not retry; fetch the resource.');
  }
}

/** Stores an answer in a transaction of its own (the operation's own 4xx, after its writes rolled back). */
export async function storeIdempotentResponseAlone(db: Knex, claim: Claimed, response: StoredResponse): Promise<void> {
  await inWriteTransaction(db, (trx) => storeIdempotentResponse(trx, claim, response));
}

/** Releases a claim after a 5xx or crash of the operation, so that a retry runs it again. */
export async function releaseIdempotencyKey(db: Knex, claim: Claimed): Promise<void> {
  await deleteClaim(db, claim.apiKeyId, claim.key, claim.token);
}
