import type { Response } from 'express';
import type { Logger } from 'pino';

/**
 * What the app knows about a request as it travels through the middleware: set by requestLog
 * (id, logger) and filled in as routing and authentication learn more. Read it through
 * `contextOf(res)` rather than untyped `res.locals`.
 */
export interface RequestContext {
  requestId: string;
  log: Logger;
  /** The matched operation and its path template, once routed. */
  operationId?: string;
  route?: string;
  /** The API key and its organization, once authenticated. */
  apiKeyId?: string;
  organizationId?: string;
  /** The rate limiter's verdict: `allowed`, `limited:<policy>`, or none when no limit applied. */
  rateLimit?: string;
  /** The stable code of the error answer, if any (for metrics). */
  errorCode?: string;
}

export function startContext(res: Response, context: RequestContext): RequestContext {
  res.locals.context = context;
  return context;
}

export function contextOf(res: Response): RequestContext {
  return res.locals.context as RequestContext;
}
