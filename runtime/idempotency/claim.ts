import { randomUUID } from 'node:crypto';
import { Knex } from 'knex';
import type { Reply } from '../reply';
import { ApiError } from '../errors';
import { beginWriteTransaction, inWriteTransaction, WriteTransaction } from '../storage/writeTransaction';
import { dialectOf } from '../storage/databaseErrors';
import {
  completeIdempotencyKey,
  deleteClaim,
  findIdempotencyKey,
  IdempotencyRow,
  insertClaimIfAbsent,
  renewLeases,
  takeOverExpired,
  takeOverStaleLease,
  tryLockAndClaimKey,
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
 * 1. claim: Postgres takes an advisory lock on the key in the transaction that will run the
 *    operation, without waiting (a concurrent duplicate answers IDEMPOTENCY_IN_PROGRESS at
 *    once), and inserts the row there. SQLite inserts the row and commits it before the
 *    operation (in a write transaction of its own, which commits with the others of its turn),
 *    with a short lease that the process renews while the request runs. The row carries the request
 *    fingerprint and a random lock token.
 * 2. run: the operation's writes and the stored response commit in one transaction whose last
 *    statement updates the row only if it still holds our lock token (fencing). A worker whose
 *    claim was taken over cannot commit; a crash leaves neither the writes nor the response.
 * 3. A claim whose owner died is taken over by the next retry: on Postgres as soon as the dead
 *    connection's transaction ended, on SQLite once the lease was not renewed for its length.
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
const inProgress = () => new ApiError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed. Wait for its answer; if it was lost, send this same request with the same key once more in a few seconds to get it (not in a loop).');

/**
 * Claims `key` for this request, or answers what the request gets instead: the stored
 * response (replay), or 409 IDEMPOTENCY_KEY_REUSED / IDEMPOTENCY_IN_PROGRESS (thrown).
 *
 * How a claim is held depends on the database (docs/idempotency.md, "How a claim is held"):
 * - Postgres: in a transaction opened here, under an advisory lock on the key; the operation
 *   then runs in that same transaction (runClaimedOperation). Nothing is committed before the
 *   operation's own commit, and a dead process's lock ends with its connection: a retry that gets
 *   the lock knows nobody is running the key.
 * - SQLite: the claim row commits before the operation runs, with a short lease that this
 *   process renews while the request works; a claim whose lease ran out belongs to a dead process.
 */
export async function claimIdempotencyKey(
  db: Knex,
  settings: IdempotencySettings,
  apiKeyId: string,
  key: string,
  requestFingerprint: string,
): Promise<ClaimResult> {
  if (dialectOf(db) === 'postgres') return claimUnderLock(db, settings, apiKeyId, key, requestFingerprint);
  const result = await claimRow(db, settings, apiKeyId, key, requestFingerprint);
  if (result.kind === 'claimed') keepLeaseAlive(db, settings, result);
  return result;
}

/** Postgres claim transactions still open, by claim (kept off the Claimed object itself). */
const heldTransactions = new WeakMap<Claimed, WriteTransaction>();

async function claimUnderLock(db: Knex, settings: IdempotencySettings, apiKeyId: string, key: string, requestFingerprint: string): Promise<ClaimResult> {
  const trx = await beginWriteTransaction(db);
  let result: ClaimResult;
  try {
    // not waiting: a duplicate answers at once instead of queueing behind the running request
    // and, when nobody holds or held the key, the claim row, in the same round trip
    const fresh = freshClaim(settings, apiKeyId, key, requestFingerprint, Date.now());
    const { locked, inserted, row } = await tryLockAndClaimKey(trx.knex, fresh);
    if (!locked) throw inProgress();
    result = inserted
      ? { kind: 'claimed', apiKeyId, key, token: fresh.lock_token! }
      : await claimRow(trx.knex, settings, apiKeyId, key, requestFingerprint, row);
  } catch (err) {
    await trx.rollback();
    throw err;
  }
  if (result.kind === 'claimed') heldTransactions.set(result, trx);
  else await trx.rollback();
  return result;
}

/**
 * The claim decisions, on `db` (Postgres: the locked claim transaction, so that nobody else is
 * deciding about this key meanwhile; SQLite: one statement at a time, each write committed
 * before the next step, see claimStatement).
 * A row held by someone else is left alone while its lease lives; on Postgres such a row is only
 * ever committed by an older release of this server, which held keys by lease alone.
 */
async function claimRow(
  db: Knex,
  settings: IdempotencySettings,
  apiKeyId: string,
  key: string,
  requestFingerprint: string,
  /** The row as read already under the key's lock (Postgres), for the first attempt. */
  readUnderLock?: IdempotencyRow,
): Promise<ClaimResult> {
  let alreadyRead = readUnderLock !== undefined || dialectOf(db) === 'postgres';
  for (let attempt = 0; attempt < 5; attempt++) {
    const now = Date.now();
    const fresh = freshClaim(settings, apiKeyId, key, requestFingerprint, now);
    const token = fresh.lock_token!;
    // read first: on SQLite a read needs no write lock, so a duplicate of a running request
    // answers at once instead of waiting for that request's write transaction
    let row = alreadyRead ? readUnderLock : await findIdempotencyKey(db, apiKeyId, key);
    alreadyRead = false;
    if (!row) {
      if (await claimStatement(db, (w) => insertClaimIfAbsent(w, fresh))) return { kind: 'claimed', apiKeyId, key, token };
      row = await findIdempotencyKey(db, apiKeyId, key);
      if (!row) continue; // purged between the two statements: try again
    }

    const nowIso = new Date(now).toISOString();
    const leaseLive = row.state === 'in_progress' && row.locked_until !== null && row.locked_until > nowIso;
    if (row.expires_at <= nowIso) {
      // Retention is over: the key starts a new operation, whatever its body — but only once
      // nobody holds it, so that a retention shorter than a running operation never lets a
      // second run start beside the first.
      if (leaseLive) throw inProgress();
      const taken = await claimStatement(db, (w) => takeOverExpired(w, apiKeyId, key, row!, fresh));
      if (taken) return { kind: 'claimed', apiKeyId, key, token };
      continue;
    }
    // while the request holding the key runs, a duplicate learns only that, whatever its body:
    // that request may yet fail and leave the key without an answer, free for another request.
    // Its body is compared once that request has finished (docs/idempotency.md)
    if (leaseLive) throw inProgress();
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
    // the lease ran out: the process that held it stopped renewing it (it died); take the claim
    // over, unless it renewed meanwhile (the update is fenced on the lease seen)
    const taken = await claimStatement(db, (w) => takeOverStaleLease(w, apiKeyId, key, row!, token, isoIn(now, settings.leaseSeconds)));
    if (taken) return { kind: 'claimed', apiKeyId, key, token };
  }
  throw inProgress();
}

/**
 * Runs one write of the claim decisions. On SQLite, as a write transaction of its own, so the
 * claim is committed before it is answered: the SQLite write transactions of one turn commit
 * together (storage/sqliteGroupCommit.ts), and a statement outside one would join that group
 * without waiting for it — if its COMMIT then failed, the operation would run on a claim that no
 * longer exists and could not store its answer. On Postgres `db` is the claim's held transaction.
 */
function claimStatement<T>(db: Knex, write: (db: Knex) => Promise<T>): Promise<T> {
  return dialectOf(db) === 'postgres' ? write(db) : inWriteTransaction(db, write);
}

/** A new in-progress claim row with a fresh lock token and lease. */
function freshClaim(settings: IdempotencySettings, apiKeyId: string, key: string, requestFingerprint: string, now: number): IdempotencyRow {
  return {
    api_key_id: apiKeyId,
    idempotency_key: key,
    fingerprint: requestFingerprint,
    state: 'in_progress',
    lock_token: randomUUID(), // 122 random bits from node's pooled CSPRNG (no system call per request)
    locked_until: isoIn(now, settings.leaseSeconds),
    response_status: null,
    response_headers: null,
    response_body: null,
    created_at: new Date(now).toISOString(),
    expires_at: isoIn(now, settings.ttlSeconds),
  };
}

/**
 * Runs the claimed operation's transaction: `work` gets the transaction, and its writes commit
 * together with the stored response (storeIdempotentResponse, its last statement). When `work`
 * fails, its writes roll back but the claim stays held, for storeIdempotentResponseAlone or
 * releaseIdempotencyKey — except after LeaseLostError: the key is someone else's then.
 * Postgres: a savepoint inside the claim transaction, which commits after it.
 */
export async function runClaimedOperation<T>(db: Knex, claim: Claimed, work: (trx: Knex) => Promise<T>): Promise<T> {
  const held = heldTransactions.get(claim);
  if (!held) {
    try {
      const result = await inWriteTransaction(db, work);
      stopKeepingLease(claim);
      return result;
    } catch (err) {
      if (err instanceof LeaseLostError) stopKeepingLease(claim);
      throw err;
    }
  }
  // A savepoint of our own rather than a nested Knex transaction: its RELEASE would be one more
  // round trip after the operation's inserts, while the organization's ordered-insert locks are
  // held (storage/orderedInsert.ts); COMMIT keeps the savepoint's work without it.
  let result: T;
  await held.savepoint('claimed_operation');
  try {
    result = await work(held.knex);
  } catch (err) {
    if (err instanceof LeaseLostError) await endClaimTransaction(claim);
    // the claim row stays; a failed rollback means the connection is gone, and the claim with it
    else await held.rollbackToSavepoint('claimed_operation').catch(() => undefined);
    throw err;
  }
  try {
    await held.commit();
  } finally {
    heldTransactions.delete(claim);
  }
  return result;
}

/** Rolls back a Postgres claim transaction still open: the claim row vanishes, the lock ends. */
async function endClaimTransaction(claim: Claimed): Promise<void> {
  const held = heldTransactions.get(claim);
  if (!held) return;
  heldTransactions.delete(claim);
  await held.rollback();
}

/**
 * Stores the response inside the operation's transaction. Fenced on the lock token: when the
 * claim was taken over meanwhile, nothing is stored, LeaseLostError is thrown and the transaction
 * rolls back — on Postgres by its COMMIT, which the statement travels with
 * (storage/pgPipeline.ts): the COMMIT then throws LeaseLostError.
 */
export async function storeIdempotentResponse(trx: Knex, claim: Claimed, response: StoredResponse): Promise<void> {
  await completeIdempotencyKey(trx, claim.apiKeyId, claim.key, claim.token, response, () => new LeaseLostError());
}

/** The claim was taken over by another request after our lease ran out: our work must not commit. */
export class LeaseLostError extends ApiError {
  constructor() {
    super('IDEMPOTENCY_IN_PROGRESS', 'The lease on this Idempotency-Key ran out and another request with it took over. Send this same request with the same key once more in a few seconds to get that request\'s answer (not in a loop).');
  }
}

/** Stores an answer in a transaction of its own (the operation's own 4xx, after its writes rolled back). */
export async function storeIdempotentResponseAlone(db: Knex, claim: Claimed, response: StoredResponse): Promise<void> {
  const held = heldTransactions.get(claim);
  try {
    if (!held) {
      await inWriteTransaction(db, (trx) => storeIdempotentResponse(trx, claim, response));
      return;
    }
    await storeIdempotentResponse(held.knex, claim, response);
    await held.commit();
    heldTransactions.delete(claim);
  } finally {
    stopKeepingLease(claim);
    await endClaimTransaction(claim);
  }
}

/** Releases a claim after a 5xx or crash of the operation, so that a retry runs it again. */
export async function releaseIdempotencyKey(db: Knex, claim: Claimed): Promise<void> {
  stopKeepingLease(claim);
  if (heldTransactions.has(claim)) return endClaimTransaction(claim);
  await deleteClaim(db, claim.apiKeyId, claim.key, claim.token);
}

/**
 * SQLite lease renewal. Per database handle, one timer renews the leases of every claim this
 * process is running, in one statement, as long as there is one. The list is this process's own
 * work, not shared state: another process only ever sees the renewed lease in the database.
 * A renewal waits for the write lock like any write; while it waits, nobody else can write
 * either, so nobody can take the claim over (see IDEMPOTENCY_LEASE_SECONDS in the README).
 */
interface LeaseKeeper {
  db: Knex;
  leaseSeconds: number;
  claims: Set<Claimed>;
  timer?: NodeJS.Timeout;
  renewing: boolean;
}

const keepers = new WeakMap<Knex, Map<number, LeaseKeeper>>();
const keeperOf = new WeakMap<Claimed, LeaseKeeper>();

/** How often a running request's lease is renewed: a few times per lease, at least every second. */
export function leaseRenewalMs(leaseSeconds: number): number {
  return Math.min(1000, Math.floor((leaseSeconds * 1000) / 4));
}

function keepLeaseAlive(db: Knex, settings: IdempotencySettings, claim: Claimed): void {
  let byLease = keepers.get(db);
  if (!byLease) keepers.set(db, (byLease = new Map()));
  let keeper = byLease.get(settings.leaseSeconds);
  if (!keeper) {
    keeper = { db, leaseSeconds: settings.leaseSeconds, claims: new Set(), renewing: false };
    byLease.set(settings.leaseSeconds, keeper);
  }
  keeper.claims.add(claim);
  keeperOf.set(claim, keeper);
  if (!keeper.timer) {
    const k = keeper;
    k.timer = setInterval(() => void renewAll(k), leaseRenewalMs(k.leaseSeconds));
    k.timer.unref();
  }
}

function stopKeepingLease(claim: Claimed): void {
  const keeper = keeperOf.get(claim);
  if (!keeper) return;
  keeperOf.delete(claim);
  keeper.claims.delete(claim);
  if (keeper.claims.size === 0 && keeper.timer) {
    clearInterval(keeper.timer);
    keeper.timer = undefined;
  }
}

const RENEWAL_CHUNK = 200;

async function renewAll(keeper: LeaseKeeper): Promise<void> {
  if (keeper.renewing) return;
  keeper.renewing = true;
  try {
    const claims = [...keeper.claims];
    for (let i = 0; i < claims.length; i += RENEWAL_CHUNK) {
      const chunk = claims.slice(i, i + RENEWAL_CHUNK);
      // the new lease counts from when the statement runs, not from when it was queued
      const held = await inWriteTransaction(keeper.db, (trx) => renewLeases(trx, chunk, isoIn(Date.now(), keeper.leaseSeconds)));
      // completed, released or taken over: nothing left to renew
      for (const claim of chunk) if (!held.has(claim.token)) stopKeepingLease(claim);
    }
  } catch {
    // the next tick tries again; a lease lasts several ticks
  } finally {
    keeper.renewing = false;
  }
}
