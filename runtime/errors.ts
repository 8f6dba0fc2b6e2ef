/**
 * The error catalogue: every stable `code` is defined here once, with its HTTP status.
 * Handlers and the runtime throw ApiError; one middleware (http/errorRendering.ts) renders
 * `{error, code, details, requestId}`. A few other errors are mapped there (a malformed cursor,
 * an unreachable database, a malformed URL); anything else becomes 500 INTERNAL.
 */
export const ERROR_CODES = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  IDEMPOTENCY_KEY_INVALID: 400,
  TARGET_NOT_ALLOWED: 400,
  UNAUTHENTICATED: 401,
  INSUFFICIENT_SCOPE: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  ALREADY_EXISTS: 409,
  INVALID_TRANSITION: 409,
  RUN_INCOMPLETE: 409,
  IDEMPOTENCY_KEY_REUSED: 409,
  IDEMPOTENCY_IN_PROGRESS: 409,
  REQUEST_TIMEOUT: 408,
  CURSOR_EXPIRED: 410,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HEADERS_TOO_LARGE: 431,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  NOT_IMPLEMENTED: 501,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorDetail {
  path?: string;
  message: string;
}

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERROR_CODES[code];
  }
}

export const validationError = (message: string, details?: ErrorDetail[]) => new ApiError('VALIDATION_ERROR', message, details);
export const invalidField = (path: string, message: string) => new ApiError('VALIDATION_ERROR', `${path} ${message}`, [{ path, message }]);
export const notFound = (what: string, id?: string) => new ApiError('NOT_FOUND', id === undefined ? what : `No ${what} with id ${id}`);
export const alreadyExists = (message: string) => new ApiError('ALREADY_EXISTS', message);
export const invalidTransition = (message: string) => new ApiError('INVALID_TRANSITION', message);
export const notImplemented = (operationId: string) => new ApiError('NOT_IMPLEMENTED', `Operation ${operationId} is in the contract but not implemented yet`);
export const unauthenticated = (message = 'Missing or invalid API key: send Authorization: Bearer <API key>') =>
  new ApiError('UNAUTHENTICATED', message, undefined, { 'WWW-Authenticate': 'Bearer' });
export const insufficientScope = (scopes: readonly string[]) =>
  new ApiError('INSUFFICIENT_SCOPE', `This operation needs the scope ${scopes.join(' ')}`, undefined, {
    'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scopes.join(' ')}"`,
  });

/** The body of every error answer. */
export interface ErrorBody {
  error: string;
  code: ErrorCode;
  details?: ErrorDetail[];
  requestId: string;
}

/** The one place the error body is built: rendered on the wire, and stored for idempotent replays. */
export function errorBody(err: ApiError, requestId: string): ErrorBody {
  return { error: err.message, code: err.code, ...(err.details?.length ? { details: err.details } : {}), requestId };
}

/** Seconds a client is asked to wait (Retry-After) before retrying while the database is unreachable or busy, or a process is not ready. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;
