import type { Knex } from 'knex';
import { ApiError, errorBody } from '../errors';
import type { Reply } from '../reply';
import { inWriteTransaction } from '../storage/writeTransaction';
import { inBatchOfItsOwn, inBatchOrAlone } from '../storage/pgGroupCommit';
import { dialectOf } from '../storage/databaseErrors';
import {
  claimIdempotencyKey,
  Claimed,
  IdempotencySettings,
  LeaseLostError,
  releaseIdempotencyKey,
  runClaimedOperation,
  storeIdempotentResponse,
  storeIdempotentResponseAlone,
} from './claim';

/** The key a write request carries, and its fingerprint (request.ts). */
export interface KeyedRequest {
  apiKeyId: string;
  key: string;
  fingerprint: string;
}

/** A write request: its organization, its id, and its Idempotency-Key if it sent one. */
export interface WriteRequest {
  orgId: string;
  requestId: string;
  keyed?: KeyedRequest;
}

/**
 * Runs one write operation (`work`, given the request's transaction) and answers its reply.
 * Without a key: one transaction. With a key: claim it, replay a stored answer
 * (`replayed: true`), or run the operation with its answer stored in the same transaction,
 * under the store-or-release policy below.
 *
 * `prepare`, when given, runs first and outside the operation's transaction (after the claim,
 * so a replay skips it; its error is treated as the operation's own). On Postgres a claimed key's
 * transaction is already open then (it holds the key's lock from the claim to the commit), but
 * it holds no lock of the organization yet; on SQLite nothing is open.
 */
export async function runWrite(
  db: Knex,
  settings: IdempotencySettings,
  request: WriteRequest,
  work: (trx: Knex) => Promise<Reply>,
  prepare?: () => Promise<void>,
): Promise<{ reply: Reply; replayed: boolean }> {
  const attempt = (handle: Knex) => runWriteOnce(handle, settings, request, work, prepare);
  if (dialectOf(db) !== 'postgres') return attempt(db);
  // Postgres: the writes of one organization in one turn share a transaction and its commit
  // (storage/pgGroupCommit.ts); a write with a `prepare` step, which waits on the network, has a
  // transaction of its own, behind the same organization's write lock
  return prepare === undefined ? inBatchOrAlone(db, request.orgId, attempt) : inBatchOfItsOwn(db, request.orgId, attempt);
}

async function runWriteOnce(
  db: Knex,
  settings: IdempotencySettings,
  { keyed, requestId }: WriteRequest,
  work: (trx: Knex) => Promise<Reply>,
  prepare?: () => Promise<void>,
): Promise<{ reply: Reply; replayed: boolean }> {
  if (keyed === undefined) {
    await prepare?.();
    return { reply: await inWriteTransaction(db, work), replayed: false };
  }
  const claim = await claimIdempotencyKey(db, settings, keyed.apiKeyId, keyed.key, keyed.fingerprint);
  if (claim.kind === 'replay') return { reply: claim.response, replayed: true };
  const reply = await runClaimed(db, claim, requestId, async () => {
    await prepare?.();
    return runClaimedOperation(db, claim, async (trx) => {
      const answer = await work(trx);
      await storeIdempotentResponse(trx, claim, { status: answer.status, headers: answer.headers ?? {}, body: answer.body });
      return answer;
    });
  });
  return { reply, replayed: false };
}

/**
 * Codes that mean "the request was refused before the operation did anything", wherever they
 * are detected (a handler may validate what the schema cannot express): never stored, the key
 * is released so a corrected request may reuse it (docs/architecture.md, "Idempotency").
 */
const REFUSED_BEFORE_RUNNING: ReadonlySet<string> = new Set([
  'VALIDATION_ERROR', 'INVALID_JSON', 'IDEMPOTENCY_KEY_INVALID', 'UNAUTHENTICATED', 'INSUFFICIENT_SCOPE',
  'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'RATE_LIMITED',
]);

/**
 * Runs the claimed operation. Its own 4xx (NOT_FOUND, INVALID_TRANSITION…) is stored like a
 * success, after its writes rolled back; a refusal, a 5xx or a crash releases the claim for a
 * retry. A lost lease means another request owns the key now: leave its row alone.
 */
async function runClaimed(db: Knex, claim: Claimed, requestId: string, work: () => Promise<Reply>): Promise<Reply> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof LeaseLostError) throw err;
    if (err instanceof ApiError && err.status < 500 && !REFUSED_BEFORE_RUNNING.has(err.code)) {
      try {
        await storeIdempotentResponseAlone(db, claim, { status: err.status, headers: err.headers, body: errorBody(err, requestId) });
      } catch (storeErr) {
        if (storeErr instanceof LeaseLostError) throw storeErr;
        await releaseIdempotencyKey(db, claim).catch(() => undefined);
        throw storeErr;
      }
    } else {
      await releaseIdempotencyKey(db, claim).catch(() => undefined);
    }
    throw err;
  }
}
