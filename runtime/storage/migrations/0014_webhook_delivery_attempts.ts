import { Knex } from 'knex';

/**
 * `webhook_delivery_attempts`: one row per attempt that got an outcome, written by the delivery
 * engine in the transaction that stores the outcome on its delivery, and read by
 * `GET …/deliveries/{deliveryId}` (its `attemptHistory`). A delivery keeps only its last outcome;
 * an integrator debugging a flaky receiver needs each answer and how long it took.
 *
 * - (delivery_id, seq): a delivery's attempts in order.
 * - subscription_id: deleting a subscription deletes its attempts with its deliveries.
 * - started_at: the retention purge deletes attempts older than the event retention, as it
 *   deletes deliveries and events (an attempt of a deleted delivery is never read: the delivery
 *   is looked up first).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_delivery_attempts', (t) => {
    t.bigIncrements('seq').primary();
    t.string('org_id', 40).notNullable();
    t.string('subscription_id', 40).notNullable();
    t.string('delivery_id', 40).notNullable();
    t.integer('attempt').notNullable();
    t.string('target_url', 2000).notNullable(); // where it went: a subscription's target may change
    t.string('started_at', 30).notNullable();
    t.integer('duration_ms').notNullable();
    t.string('outcome', 20).notNullable(); // succeeded | failed
    t.integer('response_status');
    t.string('response_excerpt', 500);
    t.index(['delivery_id', 'seq']);
    t.index(['subscription_id']);
    t.index(['started_at']);
  });
}
