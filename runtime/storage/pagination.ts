import { Knex } from 'knex';
import { validationError } from '../errors';

/**
 * Keyset pagination (decisions.md §4). The cursor is an opaque base64url token holding the
 * sort key of the last item of the page; the next page continues strictly after it, so a
 * walk returns every item exactly once even while items are added (new rows sort later).
 */
export interface PageRequest {
  limit: number;
  cursor?: string;
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

/** A sort key: columns in order (all ascending); the last is the unique integer `seq`, those before it text. */
export type SortKey = readonly string[];

export async function fetchPage<Row extends Record<string, any>, T>(
  query: Knex.QueryBuilder,
  sortKey: SortKey,
  page: PageRequest,
  toResource: (row: Row) => T,
): Promise<Page<T>> {
  if (page.cursor !== undefined) {
    // every sort key ends with the row's `seq`; the columns before it are text (timestamps, ids)
    const after = decodeCursor(page.cursor, sortKey.map((_, i) => (i === sortKey.length - 1 ? 'integer' : 'text')));
    // (c1, c2, …) > (v1, v2, …), written out so that it means the same on SQLite and Postgres
    query.where((outer) => {
      sortKey.forEach((_, i) => {
        outer.orWhere((inner) => {
          for (let j = 0; j < i; j++) inner.where(sortKey[j], after[j]);
          inner.where(sortKey[i], '>', after[i]);
        });
      });
    });
  }
  for (const column of sortKey) query.orderBy(column, 'asc');
  const rows: Row[] = await query.limit(page.limit + 1);
  const hasMore = rows.length > page.limit;
  const pageRows = hasMore ? rows.slice(0, page.limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    data: pageRows.map(toResource),
    nextCursor: hasMore && last ? encodeCursor(sortKey.map((c) => last[unqualified(c)])) : null,
  };
}

function unqualified(column: string): string {
  return column.includes('.') ? column.slice(column.lastIndexOf('.') + 1) : column;
}

/** What each position of a cursor holds: a text (timestamps, ids) or a non-negative integer (a row's seq). */
export type CursorShape = readonly ('text' | 'integer')[];

/** An opaque cursor for the sort-key values of the last item of a page. */
export function encodeCursor(values: readonly unknown[]): string {
  return Buffer.from(JSON.stringify(values)).toString('base64url');
}

/**
 * The values of a cursor this API issued, checked against `shape` so that a tampered cursor is a
 * 400 and never reaches a query (Postgres refuses `seq > 'x'` with an error, SQLite would
 * silently compare across types).
 */
export function decodeCursor(cursor: string, shape: CursorShape): (string | number)[] {
  try {
    const values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(values) && values.length === shape.length && values.every((v, i) => fitsShape(v, shape[i]))) return values;
  } catch {
    // fall through to the one error below
  }
  throw malformedCursor();
}

/** The answer to a cursor this API did not issue (or that was changed). */
export function malformedCursor() {
  return validationError('cursor is malformed: pass the nextCursor of the previous page unchanged', [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }]);
}

function fitsShape(value: unknown, kind: 'text' | 'integer'): boolean {
  return kind === 'text' ? typeof value === 'string' && value.length <= 200 : Number.isSafeInteger(value) && (value as number) >= 0;
}
