import type { Knex } from 'knex';

export interface SentStatement {
  sql: string;
  bindings: unknown[];
}

/**
 * The statements Knex sends while `run` runs, with their bindings, so that a test can ask the
 * database for the plan of exactly what a repository function sends (test/deliveryPoll.test.ts,
 * test/listFilterIndexes.test.ts).
 */
export async function statementsSent(knex: Knex, run: () => Promise<unknown>): Promise<SentStatement[]> {
  const sent: SentStatement[] = [];
  const listener = (q: { sql: string; bindings?: unknown[] }) => sent.push({ sql: q.sql, bindings: q.bindings ?? [] });
  knex.on('query', listener);
  try {
    await run();
  } finally {
    knex.removeListener('query', listener);
  }
  return sent;
}
