/** The rows of a `db.raw` select: better-sqlite3 answers the rows themselves, pg a result object holding them. */
export function rowsOf<T>(result: unknown): T[] {
  return Array.isArray(result) ? (result as T[]) : (result as { rows: T[] }).rows;
}
