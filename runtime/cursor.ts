/**
 * Pages and their cursors, shared by every layer that pages: storage (keyset over rows) and
 * domain (the computed calendar, the integration catalogue). A cursor is an opaque base64url
 * token holding the sort key of the last item of a page; the next page continues strictly
 * after it, so a walk returns every item exactly once even while items are added (new items
 * sort later). See docs/architecture.md, "Lists and cursors".
 */
export interface PageRequest {
  limit: number;
  cursor?: string;
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

/** What each position of a cursor holds: a text (timestamps, ids) or a non-negative integer (a row's seq). */
export type CursorShape = readonly ('text' | 'integer')[];

/**
 * A cursor this API did not issue (or that was changed). It knows nothing of HTTP: the http
 * layer answers it as 400 VALIDATION_ERROR pointing at the request's `cursor` parameter.
 */
export class MalformedCursorError extends Error {
  constructor() {
    super('cursor is malformed: pass the nextCursor of the previous page unchanged');
  }
}

/** An opaque cursor for the sort-key values of the last item of a page. */
export function encodeCursor(values: readonly unknown[]): string {
  return Buffer.from(JSON.stringify(values)).toString('base64url');
}

/**
 * The values of a cursor this API issued, checked against `shape` so that a tampered cursor is
 * refused and never reaches a query (Postgres refuses `seq > 'x'` with an error, SQLite would
 * silently compare across types).
 */
export function decodeCursor(cursor: string, shape: CursorShape): (string | number)[] {
  try {
    const values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(values) && values.length === shape.length && values.every((v, i) => fitsShape(v, shape[i]))) return values;
  } catch {
    // fall through to the one error below
  }
  throw new MalformedCursorError();
}

function fitsShape(value: unknown, kind: 'text' | 'integer'): boolean {
  // text goes into a query as a bound value: no NUL or lone surrogate, which Postgres refuses (a 500, not a 400)
  return kind === 'text'
    ? typeof value === 'string' && value.length <= 200 && !value.includes('\u0000') && value.isWellFormed()
    : Number.isSafeInteger(value) && (value as number) >= 0;
}
