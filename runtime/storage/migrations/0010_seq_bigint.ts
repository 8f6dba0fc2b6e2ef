import { Knex } from 'knex';

/**
 * Every listed table's `seq` becomes a 64-bit integer on Postgres, with its sequence.
 *
 * The earlier migrations made `seq` with `increments()`: on Postgres a `serial`, 32 bits, whose
 * sequence stops at 2 147 483 647 and is never reset (rolled-back inserts and purged rows use
 * numbers up too). Sensor readings arrive by the thousand per second on a busy platform, and
 * every write records an event: at 1 000 a second a 32-bit `seq` runs out in under 25 days,
 * and every insert after that fails. 64 bits last for ever; the API answers `sequence` and
 * cursors as JSON numbers, exact up to 2^53 (storage/database.ts reads them as numbers).
 * SQLite's integers are 64-bit already: nothing to do there.
 *
 * On Postgres the change rewrites each table and its indexes under an exclusive lock, so on a
 * large database this migration takes a while, and writes wait for it (README.md, "Running in
 * production"). New tables use `bigIncrements` (test/seqBigint.test.ts checks every `seq`).
 */
export const SEQ_TABLES = [
  'sites', 'users', 'checkins', 'logs', 'sensor_readings', 'assets', 'issues', 'webhook_subscriptions',
  'templates', 'runs', 'schedules', 'events', 'webhook_deliveries',
] as const;

export async function up(knex: Knex): Promise<void> {
  if (knex.client.config.client !== 'pg') return;
  for (const table of SEQ_TABLES) {
    await knex.raw('alter table ?? alter column seq type bigint', [table]);
    const { rows } = await knex.raw<{ rows: { name: string }[] }>('select pg_get_serial_sequence(?, ?) as name', [table, 'seq']);
    // the sequence's own type bounds nextval(); `as bigint` also lifts its maximum
    await knex.raw(`alter sequence ${rows[0].name} as bigint`);
  }
}
