import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { newRequestId } from '../ids';
import { startContext } from './requestContext';

/**
 * Gives every request an id (`X-Request-Id` on every response) and writes one structured log
 * line when it ends: request id, method, route template, operation, status (null with
 * `aborted: true` for one closed before its answer was sent), the error answer's `code`, duration,
 * client address, the API key and organization ids and the rate-limit outcome, and what a proxy in
 * front said the request was: its `X-Request-Id` (`upstreamRequestId`) and the W3C `traceparent`'s
 * trace id (`traceId`), so that its logs and these can be joined. The server's own id stays the
 * one it answers: a client's value is logged, never trusted as this request's name. Never a
 * secret, a body or a query string.
 */
export function requestLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = process.hrtime.bigint();
    const requestId = newRequestId();
    const context = startContext(res, { requestId, log: logger });
    res.setHeader('X-Request-Id', requestId);
    let logged = false;
    const log = () => {
      if (logged) return;
      logged = true;
      // closed before its answer was sent whole: the client went away, or shutdown cut it
      const aborted = !res.writableFinished;
      logger.info({
        requestId,
        method: req.method,
        route: context.route ?? null,
        operationId: context.operationId ?? null,
        status: aborted ? null : res.statusCode,
        ...(aborted ? { aborted: true } : {}),
        ...(context.errorCode ? { code: context.errorCode } : {}),
        durationMs: Number(process.hrtime.bigint() - started) / 1e6,
        // the client's address (behind a proxy, with TRUST_PROXY, the one it reported)
        ip: req.ip ?? null,
        apiKeyId: context.apiKeyId ?? null,
        organizationId: context.organizationId ?? null,
        // allowed, limited:<policy> or null when no limit applied (public routes, unknown paths)
        rateLimit: context.rateLimit ?? null,
        ...upstreamIds(req),
      }, 'request');
    };
    res.on('finish', log);
    res.on('close', log);
    next();
  };
}

/** Printable, short, no spaces: what a proxy's request id looks like; anything else is not logged. */
const UPSTREAM_ID = /^[\x21-\x7e]{1,128}$/;
/** W3C Trace Context `traceparent`: version, trace id, parent id, flags. */
const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;

function upstreamIds(req: Request): { upstreamRequestId?: string; traceId?: string } {
  const requestId = req.headers['x-request-id'];
  const trace = TRACEPARENT.exec(String(req.headers.traceparent ?? '').trim());
  return {
    ...(typeof requestId === 'string' && UPSTREAM_ID.test(requestId) ? { upstreamRequestId: requestId } : {}),
    ...(trace && !/^0+$/.test(trace[1]) ? { traceId: trace[1] } : {}),
  };
}
