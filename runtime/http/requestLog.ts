import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { newRequestId } from '../ids';
import { startContext } from './requestContext';

/**
 * Gives every request an id (`X-Request-Id` on every response) and writes one structured log
 * line when it ends: request id, method, route template, operation, status (null with
 * `aborted: true` for one closed before its answer was sent), duration, client address, the
 * API key and organization ids and the rate-limit outcome. Never a secret, a body or a query string.
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
        durationMs: Number(process.hrtime.bigint() - started) / 1e6,
        // the client's address (behind a proxy, with TRUST_PROXY, the one it reported)
        ip: req.ip ?? null,
        apiKeyId: context.apiKeyId ?? null,
        organizationId: context.organizationId ?? null,
        // allowed, limited:<policy> or null when no limit applied (public routes, unknown paths)
        rateLimit: context.rateLimit ?? null,
      }, 'request');
    };
    res.on('finish', log);
    res.on('close', log);
    next();
  };
}
