import { createHash } from 'node:crypto';
import { ApiError } from '../errors';

/**
 * The request side of idempotency: the header, and the fingerprint that says whether a retry
 * is "the same request" (same method, path and JSON body).
 */

export const IDEMPOTENCY_HEADER = 'idempotency-key';

/** Reads the header: absent → undefined; empty, too long or sent twice → 400 IDEMPOTENCY_KEY_INVALID. */
export function readIdempotencyKey(values: string[] | undefined): string | undefined {
  if (values === undefined) return undefined;
  if (values.length !== 1) throw new ApiError('IDEMPOTENCY_KEY_INVALID', 'Send the Idempotency-Key header once');
  const key = values[0];
  if (key.length < 1 || key.length > 128) throw new ApiError('IDEMPOTENCY_KEY_INVALID', 'Idempotency-Key must be 1 to 128 characters');
  return key;
}

/**
 * The request's fingerprint: method, path (with its query, if any) and the body as received, in
 * canonical JSON (object keys sorted, no whitespace; `1` and `"1"` stay different). The caller
 * passes the body before validation fills in defaults, so that a default changing between
 * releases does not turn a retry into IDEMPOTENCY_KEY_REUSED.
 */
export function fingerprint(method: string, path: string, body: unknown, query: Record<string, unknown> = {}): string {
  const target = Object.keys(query).length ? `${path}?${canonicalJson(query)}` : path;
  return createHash('sha256').update(`${method.toUpperCase()} ${target}\n${canonicalJson(body ?? null)}`).digest('hex');
}

/** Deeper than this, a body is refused before it is fingerprinted (the recursion below is bounded). */
const MAX_BODY_DEPTH = 64;

function canonicalJson(value: unknown, depth = 0): string {
  if (depth > MAX_BODY_DEPTH) throw new ApiError('VALIDATION_ERROR', `Request body nests deeper than ${MAX_BODY_DEPTH} levels`);
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item, depth + 1)).join(',')}]`;
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k], depth + 1)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
