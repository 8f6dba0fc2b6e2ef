import { Knex } from 'knex';

/**
 * A subscription's deliveries of one event, in list order: the `eventId` filter of the
 * deliveries list (what became of the event a receiver names by its `webhook-id`). Like every
 * list filter, served by an index that yields the matching rows in `seq` order, so a page reads
 * about its own rows and stops (docs/architecture.md, "Lists and cursors"). Deliveries are
 * inserted only for events that someone listens to, so writes without subscriptions pay nothing.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.index(['subscription_id', 'event_id', 'seq']);
  });
}
