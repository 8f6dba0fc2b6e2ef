import { createHash } from 'node:crypto';
import { ApiError } from '../errors';
import type { OperationId } from '../../generated/operations';

/**
 * A list's cursor names a position in that list's order (storage/pagination.ts, the calendar):
 * given to another list, to the same list of another parent (one subscription's deliveries and
 * another's), or to the same list with other filters, it would point at an unrelated place, and
 * the walk would skip or repeat items without a word. So the cursor a page answers carries, after
 * a dot, a digest of the operation, its path parameters and its filters (every query parameter
 * but `cursor` and `limit`, as sent); a cursor passed back is checked against the request's own
 * and refused when they differ. `limit` may change from page to page. A cursor without the
 * digest was not answered by this API (a hand-made one, or one cut short): refused too, never
 * taken as a position in whatever list it is given to. The digest guards against mistakes, not
 * forgery: a cursor only ever reaches the caller's own organization's data.
 */
export function unbindCursor(operationId: OperationId, path: Record<string, unknown>, query: Record<string, unknown>, cursor: string): string {
  const dot = cursor.lastIndexOf('.');
  if (dot < 0) {
    const detail = { path: '/query/cursor', message: 'is not a cursor issued by this API' };
    throw new ApiError('VALIDATION_ERROR', `${detail.path} ${detail.message}`, [detail]);
  }
  const digest = cursor.slice(dot + 1);
  // or the digest earlier versions gave the same list without its path (see digestOf): a walk
  // begun before an upgrade goes on after it
  if (digest !== digestOf(operationId, path, query) && digest !== digestOf(operationId, {}, query)) {
    const detail = { path: '/query/cursor', message: 'was issued for another list or other filters: pass it back to the same operation, on the same path, with the same filters' };
    throw new ApiError('VALIDATION_ERROR', `${detail.path} ${detail.message}`, [detail]);
  }
  return cursor.slice(0, dot);
}

/** The cursor to answer for a page of `operationId` read with `query`. */
export function bindCursor(operationId: OperationId, path: Record<string, unknown>, query: Record<string, unknown>, cursor: string): string {
  return `${cursor}.${digestOf(operationId, path, query)}`;
}

function digestOf(operationId: OperationId, path: Record<string, unknown>, query: Record<string, unknown>): string {
  const filters = Object.keys(query).filter((name) => name !== 'cursor' && name !== 'limit').sort().map((name) => [name, query[name]]);
  const parents = Object.keys(path).sort().map((name) => [name, path[name]]);
  // a list without path parameters digests as it did before they were included: its cursors
  // issued by an earlier version stay valid across the upgrade; those of a list with path
  // parameters are taken in the earlier form too (unbindCursor), README.md "Upgrading from a
  // version whose list cursors were not bound to their path"
  return createHash('sha256').update(JSON.stringify(parents.length ? [operationId, filters, parents] : [operationId, filters])).digest('base64url').slice(0, 11);
}
