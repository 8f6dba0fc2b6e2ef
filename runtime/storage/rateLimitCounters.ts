import type { Knex } from 'knex';

/**
 * The table of rate-limiter-flexible's Postgres store (runtime/http/rateLimit.ts), with the
 * library's own columns. UNLOGGED: a counter update then writes no WAL (a logged table made every
 * request wait for a commit flush, measured in bench/README.md); counters lost in a Postgres crash
 * only reset a minute's budget. Created on start rather than by a numbered migration, because
 * the library owns its shape.
 */
export const COUNTERS_TABLE = 'rate_limits';

export async function createCountersTable(db: Knex): Promise<void> {
  try {
    await db.raw(`CREATE UNLOGGED TABLE IF NOT EXISTS ${COUNTERS_TABLE} (key varchar(255) PRIMARY KEY, points integer NOT NULL DEFAULT 0, expire bigint)`);
  } catch (err) {
    // two processes creating it at once: the other one won
    if (!['23505', '42P07'].includes((err as { code?: string }).code ?? '')) throw err;
  }
}
