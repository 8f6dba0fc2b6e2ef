import type { NextFunction, Request, Response } from 'express';
import { ApiError, DATABASE_RETRY_AFTER_SECONDS, errorBody, validationError } from '../errors';
import { MalformedCursorError } from '../cursor';
import { isDatabaseBusy, isDatabaseUnavailable } from '../storage/databaseErrors';
import { contextOf } from './requestContext';


/**
 * The one place that renders errors: `{error, code, details?, requestId}` with the error's
 * status and headers. Anything that is not an ApiError is logged with the request id and
 * answers 500 INTERNAL — no stack trace or SQL reaches the client.
 */
export function renderError(err: unknown, req: Request, res: Response, _next: NextFunction): void {
  const { requestId, log } = contextOf(res);
  const apiError = toApiError(err);
  contextOf(res).errorCode = apiError.code;
  // the database's failures as before; a 503 the code answers itself (test messages under way, a
  // DNS lookup failing for now, /readyz) is not one, and says why in `reason`
  if (apiError.code === 'SERVICE_UNAVAILABLE') {
    if (err instanceof ApiError) log.warn({ reason: apiError.message, requestId }, 'service unavailable');
    else log.warn({ err: (err as Error)?.message, requestId }, 'database unavailable');
  }
  else if (apiError.status >= 500) log.error({ err, requestId }, 'request failed');
  if (res.headersSent) {
    res.end();
    return;
  }
  res.status(apiError.status).set(apiError.headers).json(errorBody(apiError, requestId));
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  // cursors arrive only as the `cursor` query parameter of list operations
  if (err instanceof MalformedCursorError) return validationError(err.message, [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }]);
  // the database is unreachable, or gave up on the statement for now: nothing was done, retry
  const unavailable = isDatabaseUnavailable(err);
  if (unavailable || isDatabaseBusy(err)) {
    const what = unavailable ? 'The database is unreachable' : 'The database could not finish the request in time';
    return new ApiError('SERVICE_UNAVAILABLE', `${what}; retry later (with the same Idempotency-Key for a write)`, undefined, {
      'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS),
    });
  }
  // a path segment with a broken %-escape (`/v1/users/%ZZ`), met while the router decodes it
  if (err instanceof URIError) return new ApiError('VALIDATION_ERROR', 'The URL has a malformed percent-encoding');
  const e = err as { type?: string; status?: number } | undefined;
  // errors raised by express itself before our pipeline (e.g. a malformed URL)
  if (e && e.status === 400) return new ApiError('VALIDATION_ERROR', 'Malformed request');
  return new ApiError('INTERNAL', 'Internal server error');
}
