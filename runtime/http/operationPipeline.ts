import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { operations, OperationId, OperationInfo } from '../../generated/operations';
import { validators } from '../../generated/validators';
import { handlers } from '../../generated/handlers';
import { ApiError, insufficientScope } from '../errors';
import type { Principal } from '../auth/apiKeys';
import { inWriteTransaction } from '../storage/writeTransaction';
import {
  claimIdempotencyKey,
  fingerprint,
  IdempotencySettings,
  readIdempotencyKey,
  releaseIdempotencyKey,
  runClaimedOperation,
  storeIdempotentResponse,
  storeIdempotentResponseAlone,
  Claimed,
  LeaseLostError,
  StoredResponse,
  IDEMPOTENCY_HEADER,
} from '../idempotency';
import { readJsonBody } from './jsonBody';
import { validateOrThrow } from './validation';

export interface PipelineDeps {
  db: Knex;
  idempotency: IdempotencySettings;
  maxBodyBytes: number;
}

const WRITE_METHODS = new Set(['post', 'patch', 'put', 'delete']);

/**
 * Everything between "openapi-backend matched the operation and authenticated the key"
 * (see app.ts) and the response, in this order: scope (403) → Idempotency-Key syntax → body (415/413/INVALID_JSON)
 * → contract validation (400) → idempotency claim (replay/409) → handler, in one transaction
 * with the stored response for writes.
 */
export async function runOperation(
  deps: PipelineDeps,
  operationId: OperationId,
  principal: Principal,
  params: Record<string, string>,
  req: Request,
  res: Response,
): Promise<void> {
  const op: OperationInfo = operations[operationId];
  res.locals.apiKeyId = principal.keyId;
  const missing = op.scopes.filter((s) => !principal.scopes.has(s));
  if (missing.length) throw insufficientScope(op.scopes);

  const isWrite = WRITE_METHODS.has(op.method);
  const idempotencyKey = isWrite ? readIdempotencyKey(req.headersDistinct[IDEMPOTENCY_HEADER]) : undefined;
  const rawBody = op.hasRequestBody ? await readJsonBody(req, res, deps.maxBodyBytes) : undefined;
  // fingerprint the body as received, before validation fills in defaults
  const requestFingerprint = idempotencyKey === undefined ? '' : fingerprint(op.method, req.path, rawBody, req.query as Record<string, unknown>);

  const v = validators[operationId];
  const path = validateOrThrow(v.path, { ...params }, '/path');
  const query = validateOrThrow(v.query, { ...(req.query as Record<string, unknown>) }, '/query');
  let body: unknown;
  if (v.body) {
    if (rawBody === undefined) throw new ApiError('VALIDATION_ERROR', 'This operation needs a JSON request body', [{ path: '', message: 'is required' }]);
    body = validateOrThrow(v.body, rawBody, '');
  }

  const log: Logger = res.locals.log;
  const input = { operationId, path, query, body, principal, requestId: res.locals.requestId, log } as const;
  const handler = handlers[operationId];

  if (!isWrite) {
    return send(res, await handler({ ...input, db: deps.db }));
  }
  if (idempotencyKey === undefined) {
    return send(res, await inWriteTransaction(deps.db, (trx) => handler({ ...input, db: trx })));
  }

  const claim = await claimIdempotencyKey(deps.db, deps.idempotency, principal.keyId, idempotencyKey, requestFingerprint);
  if (claim.kind === 'replay') {
    res.set('Idempotent-Replayed', 'true');
    return send(res, claim.response);
  }
  return send(res, await runClaimed(deps, claim, () => runClaimedOperation(deps.db, claim, async (trx) => {
    const reply = await handler({ ...input, db: trx });
    await storeIdempotentResponse(trx, claim, storable(reply));
    return reply;
  }), input.requestId));
}

/**
 * Codes that mean "the request was refused before the operation did anything", wherever they
 * are detected (a handler may validate what the schema cannot express): never stored, the key
 * is released so a corrected request may reuse it (decisions.md §6).
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
async function runClaimed(
  deps: PipelineDeps,
  claim: Claimed,
  work: () => Promise<{ status: number; body?: unknown; headers?: Record<string, string> }>,
  requestId: string,
) {
  try {
    return await work();
  } catch (err) {
    if (err instanceof LeaseLostError) throw err;
    if (err instanceof ApiError && err.status < 500 && !REFUSED_BEFORE_RUNNING.has(err.code)) {
      const body = { error: err.message, code: err.code, ...(err.details?.length ? { details: err.details } : {}), requestId };
      try {
        await storeIdempotentResponseAlone(deps.db, claim, { status: err.status, headers: err.headers, body });
      } catch (storeErr) {
        if (storeErr instanceof LeaseLostError) throw storeErr;
        await releaseIdempotencyKey(deps.db, claim).catch(() => undefined);
        throw storeErr;
      }
    } else {
      await releaseIdempotencyKey(deps.db, claim).catch(() => undefined);
    }
    throw err;
  }
}

/** What is kept of a reply for replays: status, body and the headers the handler set (Location). */
function storable(reply: { status: number; body?: unknown; headers?: Record<string, string> }): StoredResponse {
  return { status: reply.status, headers: reply.headers ?? {}, body: reply.body };
}

function send(res: Response, reply: { status: number; body?: unknown; headers?: Record<string, string> }): void {
  if (reply.headers) res.set(reply.headers);
  if (reply.body === undefined) res.status(reply.status).end();
  else res.status(reply.status).json(reply.body);
}
