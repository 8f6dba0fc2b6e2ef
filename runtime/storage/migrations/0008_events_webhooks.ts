import { randomBytes } from 'node:crypto';
import { Knex } from 'knex';

/**
 * The change feed (`events`), what subscriptions listen to, and their deliveries.
 *
 * - `events.seq` is the feed's order and the public `sequence`: inserts of one organization
 *   are serialized (storage/orderedInsert.ts), so seq order is commit order per organization.
 * - A subscription listens to one or more event types, one row each in
 *   `webhook_subscription_types`, so that recording an event finds its subscriptions with
 *   one index lookup. `match_key` (the trigger key, or the sorted list of types) makes
 *   "the same target for the same trigger" unique.
 * - `webhook_deliveries` is the delivery queue: all of its state is here (no process memory),
 *   claimed with a lease by any number of workers.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('events', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('type', 60).notNullable();
    t.string('resource_id', 64);
    t.text('data').notNullable(); // JSON: the resource as GET returns it, or a tombstone
    t.text('changed_fields'); // JSON array of field names, update events only
    t.string('occurred_at', 30).notNullable();
    t.index(['org_id', 'seq']);
    t.index(['org_id', 'type', 'seq']);
    t.index(['org_id', 'resource_id', 'seq']);
    t.index(['occurred_at']); // retention purge
  });

  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.string('match_key', 2000);
    t.text('secret');
    t.text('previous_secret');
    t.string('previous_secret_expires_at', 30);
    t.string('disabled_reason', 20);
    t.string('last_success_at', 30);
  });
  // subscriptions from before this migration could only be inserted directly: give each its own secret
  const existing: { id: string; trigger_key: string }[] = await knex('webhook_subscriptions').select('id', 'trigger_key');
  for (const row of existing) {
    await knex('webhook_subscriptions').where({ id: row.id }).update({ match_key: row.trigger_key, secret: `whsec_${randomBytes(24).toString('base64')}` });
  }
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.setNullable('trigger_key');
    t.unique(['org_id', 'partner', 'target_url', 'match_key']);
  });

  await knex.schema.createTable('webhook_subscription_types', (t) => {
    t.string('subscription_id', 40).notNullable();
    t.string('org_id', 40).notNullable();
    t.string('event_type', 60).notNullable();
    t.primary(['subscription_id', 'event_type']);
    t.index(['org_id', 'event_type']);
  });
  for (const row of await knex('webhook_subscriptions').select('id', 'org_id', 'trigger_key')) {
    await knex('webhook_subscription_types').insert({ subscription_id: row.id, org_id: row.org_id, event_type: row.trigger_key });
  }

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable();
    t.string('subscription_id', 40).notNullable();
    t.string('event_id', 40).notNullable();
    t.string('event_type', 60).notNullable();
    // pending (not tried yet) | failed (a retry is due at next_attempt_at) | succeeded | abandoned
    t.string('status', 20).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.string('next_attempt_at', 30);
    t.string('lease_until', 30);
    t.string('lease_token', 40);
    t.integer('last_response_status');
    t.string('last_response_excerpt', 500);
    t.string('last_attempt_at', 30);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['subscription_id', 'seq']);
    t.index(['status', 'next_attempt_at']);
    t.index(['created_at']);
  });
}
