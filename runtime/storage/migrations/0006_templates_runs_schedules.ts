import { Knex } from 'knex';

/**
 * Templates with a snapshot of every version's items, runs, and schedules.
 * A run answers the items of the version it was started with, so it reads them from
 * `template_versions`, never from the current template; templates are deleted as tombstones
 * (`deleted_at`) so that those snapshots keep their owner. JSON values (items, answers,
 * failed item ids) are text, identical on SQLite and Postgres.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('templates', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('name', 200).notNullable();
    t.text('description');
    t.integer('version').notNullable();
    t.text('items').notNullable(); // JSON array of the current version's items
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.string('deleted_at', 30);
    t.index(['org_id', 'seq']);
  });

  await knex.schema.createTable('template_versions', (t) => {
    t.string('template_id', 40).notNullable().references('id').inTable('templates');
    t.integer('version').notNullable();
    t.string('org_id', 40).notNullable();
    t.text('items').notNullable();
    t.string('created_at', 30).notNullable();
    t.primary(['template_id', 'version']);
  });

  await knex.schema.createTable('runs', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('template_id', 40).notNullable();
    t.integer('template_version').notNullable();
    t.string('site_id', 64).notNullable();
    t.string('user_id', 200).notNullable();
    t.string('asset_id', 64);
    t.string('occurrence_id', 64);
    t.string('status', 20).notNullable();
    t.text('answers').notNullable(); // JSON object item id → answer
    t.double('score');
    t.text('failed_item_ids'); // JSON array, set on completion
    t.string('started_at', 30).notNullable();
    t.string('completed_at', 30);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.foreign(['template_id', 'template_version']).references(['template_id', 'version']).inTable('template_versions');
    t.index(['org_id', 'seq']);
    // One run per calendar occurrence; NULLs are distinct on both databases, so runs without one are free.
    t.unique(['org_id', 'occurrence_id']);
  });

  await knex.schema.createTable('schedules', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('template_id', 40).notNullable();
    t.string('site_id', 64).notNullable();
    t.string('assignee_user_id', 200);
    t.string('timezone', 64).notNullable();
    t.string('starts_at', 19).notNullable(); // local wall-clock YYYY-MM-DDTHH:mm:ss in `timezone`
    t.integer('duration_minutes').notNullable();
    t.string('recurrence', 300);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['org_id', 'seq']);
  });
}
