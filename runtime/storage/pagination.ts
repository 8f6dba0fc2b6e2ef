import { Knex } from 'knex';
import { decodeCursor, encodeCursor, type Page, type PageRequest } from '../cursor';

// Keyset pagination over rows (docs/architecture.md, "Lists and cursors").

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
    // c1 >= v1, implied by what follows: the bound that starts the index range at the cursor.
    // Neither database starts a range from the OR below, so without it every later page re-read
    // the list from its start up to the cursor.
    if (sortKey.length > 1) query.where(sortKey[0], '>=', after[0]);
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
