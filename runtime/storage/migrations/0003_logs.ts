import { Knex } from 'knex';

/**
 * Append-only log entries (docs/architecture.md, "Logs and sensor readings"): no `updated_at`, and nothing ever updates or
 * deletes a row. The one list is "the entries of one entity, oldest first", so its index
 * ends in `seq`, making a page an index range scan in list order.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('logs', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('entity_type', 40).notNullable();
    t.string('entity_id', 128).notNullable();
    t.string('entry_type', 20).notNullable();
    t.text('message').notNullable();
    t.string('source', 40).notNullable();
    t.string('created_at', 30).notNullable();
    t.index(['org_id', 'entity_type', 'entity_id', 'seq'], 'logs_entity_seq');
  });
}
