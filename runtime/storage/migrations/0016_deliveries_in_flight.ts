import { Knex } from 'knex';

/**
 * The deliveries under way: those whose lease has not run out. The delivery engine counts them
 * per subscription before it claims (webhooks/deliveryClaims.ts: a subscription has at most a few
 * attempts under way at once, so that one slow receiver cannot hold every attempt of every
 * engine). Partial on a lease being set: an outcome stored clears it, so the index holds the
 * attempts under way and the few given up with their lease kept, never the backlog.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`create index webhook_deliveries_leased_index on webhook_deliveries (lease_until, subscription_id)
    where lease_until is not null`);
}
