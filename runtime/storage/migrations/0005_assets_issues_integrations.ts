import { Knex } from 'knex';

/**
 * Assets (with tombstones), issues and the partners' webhook subscriptions.
 * References to sites, assets, runs and users are plain text, not foreign keys: an issue
 * outlives the asset or run it was raised against, and check-ins set the precedent that a
 * `siteId` need not name an existing site.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('assets', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('name', 200).notNullable();
    t.string('site_id', 64);
    t.string('asset_type', 100);
    t.string('serial_number', 100);
    t.string('status', 20).notNullable();
    t.text('attributes').notNullable(); // JSON object of strings
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    // Set on delete; the row stays as a tombstone for a later change feed.
    t.string('deleted_at', 30);
    t.index(['org_id', 'seq']);
    t.index(['org_id', 'site_id']);
  });

  await knex.schema.createTable('issues', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('title', 200).notNullable();
    t.text('description');
    t.string('status', 20).notNullable();
    t.string('priority', 20).notNullable();
    t.string('site_id', 64);
    t.string('asset_id', 64);
    t.string('run_id', 64);
    t.string('assignee_user_id', 200);
    t.string('due_at', 30);
    t.string('resolved_at', 30);
    t.string('closed_at', 30);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['org_id', 'seq']);
    t.index(['org_id', 'status']);
    t.index(['org_id', 'asset_id']);
  });

  await knex.schema.createTable('webhook_subscriptions', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('partner', 40).notNullable();
    t.string('trigger_key', 100).notNullable();
    t.string('target_url', 2000).notNullable();
    t.string('status', 20).notNullable();
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['org_id', 'partner', 'seq']);
  });
}
