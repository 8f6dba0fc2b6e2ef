import { Knex } from 'knex';

/**
 * Organizations, API keys, idempotency records, the SQLite write-lock row, and sites.
 * Conventions for every table: `seq` is the internal order (keyset pagination), `id` the
 * public opaque identifier, `org_id` scopes every row, timestamps are ISO 8601 UTC text with
 * milliseconds (identical on SQLite and Postgres, and text order is time order).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('_write_lock', (t) => {
    t.integer('id').primary();
    t.integer('n').notNullable().defaultTo(0);
  });
  await knex('_write_lock').insert({ id: 1, n: 0 });

  await knex.schema.createTable('organizations', (t) => {
    t.string('id', 40).primary();
    t.string('name', 100).notNullable().unique();
    t.string('created_at', 30).notNullable();
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.string('id', 40).primary();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('name', 100).notNullable();
    t.string('prefix', 20).notNullable();
    t.string('secret_hash', 64).notNullable().unique();
    t.text('scopes').notNullable();
    t.string('created_at', 30).notNullable();
    t.string('last_used_at', 30);
    t.string('revoked_at', 30);
  });

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.string('api_key_id', 40).notNullable();
    t.string('idempotency_key', 128).notNullable();
    t.string('fingerprint', 64).notNullable();
    t.string('state', 20).notNullable(); // in_progress | completed
    t.string('lock_token', 40);
    t.string('locked_until', 30);
    t.integer('response_status');
    t.text('response_headers');
    t.text('response_body');
    t.string('created_at', 30).notNullable();
    t.string('expires_at', 30).notNullable();
    t.primary(['api_key_id', 'idempotency_key']);
    t.index(['expires_at']);
  });

  await knex.schema.createTable('sites', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('name', 200).notNullable();
    t.string('address', 500);
    t.double('latitude');
    t.double('longitude');
    t.double('geofence_radius_meters').notNullable();
    t.string('timezone', 64);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['org_id', 'seq']);
  });
}
