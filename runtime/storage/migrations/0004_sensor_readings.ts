import { Knex } from 'knex';

/**
 * Sensor readings (docs/architecture.md, "Logs and sensor readings"), meant for millions of rows per organization.
 *
 * - `sensor_readings_dedup` is the identity of a reading (provider, sensor, metric, instant)
 *   per organization; ingestion relies on it with `ON CONFLICT DO NOTHING`. (Migration 0012
 *   replaces it by `sensor_readings_identity`, the same columns with the sensor and the instant
 *   first, and gives the `provider` and `metric` filters indexes of their own.)
 * - Lists are ordered by (occurred_at, seq); the two list indexes end in exactly that key, so
 *   `siteId + occurredAfter` (the polling query) and an unfiltered time window are index range
 *   scans that stop after one page. More indexes would slow every ingested batch.
 * - `value` is a double on both databases; `occurred_at` is ISO UTC text with milliseconds like
 *   every timestamp here, so text order is time order.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('sensor_readings', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('provider', 64).notNullable();
    t.string('sensor_external_id', 128).notNullable();
    t.string('sensor_name', 200);
    t.string('site_id', 64).notNullable();
    t.string('metric', 64).notNullable();
    t.double('value').notNullable();
    t.string('unit', 32).notNullable();
    t.string('occurred_at', 30).notNullable();
    t.string('created_at', 30).notNullable();
    t.unique(['org_id', 'provider', 'sensor_external_id', 'metric', 'occurred_at'], { indexName: 'sensor_readings_dedup' });
    t.index(['org_id', 'site_id', 'occurred_at', 'seq'], 'sensor_readings_site_time');
    t.index(['org_id', 'occurred_at', 'seq'], 'sensor_readings_time');
  });
}
