import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import { operations, OperationId, OperationInfo } from '../../generated/operations';
import { validators } from '../../generated/validators';
import { handlers } from '../../generated/handlers';
import { ApiError, insufficientScope } from '../errors';
import type { Principal } from '../auth/apiKeys';
import type { Config } from '../config';
import type { Reply } from '../reply';
import type { IdempotencySettings } from '../idempotency/claim';
import { fingerprint, IDEMPOTENCY_HEADER, readIdempotencyKey } from '../idempotency/request';
import { runWrite } from '../idempotency/writes';
import { readJsonBody } from './jsonBody';
import { validateOrThrow, validateQueryOrThrow } from './validation';
import { bindCursor, unbindCursor } from './cursorBinding';
import { contextOf } from './requestContext';
import { checkHandlerRegistry } from './handler';
import { committedReads } from '../storage/committedReads';

export interface PipelineDeps {
  db: Knex;
  config: Config;
  idempotency: IdempotencySettings;
  maxBodyBytes: number;
}

const WRITE_METHODS = new Set(['post', 'patch', 'put', 'delete']);

checkHandlerRegistry(handlers); // once, as the server loads: a handler defined for another operation stops the start

/**
 * Everything between "openapi-backend matched the operation and authenticated the key"
 * (see app.ts) and the response, in this order: scope (403) → Idempotency-Key syntax → body (415/413/INVALID_JSON)
 * → contract validation (400) → idempotency claim (replay/409) → the handler's `prepare`, if it
 * has one → handler, in one transaction with the stored response for writes.
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
  const context = contextOf(res);
  context.apiKeyId = principal.keyId;
  const missing = op.scopes.filter((s) => !principal.scopes.has(s));
  if (missing.length) throw insufficientScope(op.scopes);

  const isWrite = WRITE_METHODS.has(op.method);
  const idempotencyKey = isWrite ? readIdempotencyKey(req.headersDistinct[IDEMPOTENCY_HEADER]) : undefined;
  const rawBody = op.hasRequestBody ? await readJsonBody(req, res, deps.maxBodyBytes) : undefined;
  // fingerprint the body as received, before validation fills in defaults
  const requestFingerprint = idempotencyKey === undefined ? '' : fingerprint(op.method, req.path, rawBody, req.query as Record<string, unknown>);

  const v = validators[operationId];
  const path = validateOrThrow(v.path, { ...params }, '/path');
  const queryAt = req.originalUrl.indexOf('?');
  const sent = req.query as Record<string, unknown>;
  const paged = op.queryParams.includes('cursor');
  const query = validateQueryOrThrow(
    v.query,
    paged && typeof sent.cursor === 'string' ? { ...sent, cursor: unbindCursor(operationId, path, sent, sent.cursor) } : sent,
    queryAt < 0 ? '' : req.originalUrl.slice(queryAt + 1),
    op.queryParams,
  );
  let body: unknown;
  if (v.body) {
    if (rawBody === undefined) throw new ApiError('VALIDATION_ERROR', 'This operation needs a JSON request body', [{ path: '', message: 'is required' }]);
    body = validateOrThrow(v.body, rawBody, '', op.bodyRule);
  }

  const input = { operationId, path, query, body, principal, requestId: context.requestId, log: context.log, config: deps.config } as const;
  const handler = handlers[operationId];

  if (!isWrite) {
    if (handler.prepare) throw new Error(`${operationId} is a read: a handler's prepare step is for writes only (http/handler.ts)`);
    const reply = await handler({ ...input, db: deps.db, prepared: undefined });
    const page = reply.body as { nextCursor?: unknown } | undefined;
    if (paged && typeof page?.nextCursor === 'string') page.nextCursor = bindCursor(operationId, path, sent, page.nextCursor);
    return send(res, reply);
  }
  // the key's idempotency scope: its own id, or for a rolled key its roll chain's (a retry with the new secret replays)
  const keyed = idempotencyKey === undefined ? undefined : { apiKeyId: principal.idempotencyScope, key: idempotencyKey, fingerprint: requestFingerprint };
  // a handler's `prepare` (http/handler.ts) runs outside the transaction, before it begins
  let prepared: unknown;
  const prepare = handler.prepare && (async () => { prepared = await handler.prepare!({ ...input, reads: committedReads(deps.db) }); });
  const { reply, replayed } = await runWrite(deps.db, deps.idempotency, { orgId: principal.orgId, requestId: context.requestId, keyed }, (trx) => handler({ ...input, db: trx, prepared }), prepare);
  if (replayed) res.set('Idempotent-Replayed', 'true');
  send(res, reply);
}

function send(res: Response, reply: Reply): void {
  if (reply.headers) res.set(reply.headers);
  if (reply.body === undefined) res.status(reply.status).end();
  else res.status(reply.status).json(reply.body);
}
