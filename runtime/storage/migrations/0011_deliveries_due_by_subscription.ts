import { Knex } from 'knex';

/**
 * The delivery engine finds what is due through each active subscription
 * (webhookDeliveriesRepository, dueSeqs): (subscription_id, next_attempt_at), over the deliveries
 * that have a next attempt only, reads just the due deliveries of the subscriptions that can be
 * sent to, in the order they are due. A delivery has a next attempt exactly while it is pending or
 * failed (a succeeded or abandoned one has none), so this index also counts the undelivered
 * backlog for /metrics, and (status, next_attempt_at) goes: through it every poll read the whole
 * undelivered backlog of the paused and disabled subscriptions before discarding it (with 200 000
 * held deliveries about 100 ms per poll on SQLite and on Postgres, five polls a second; `node
 * bench/micro/deliveryPoll.cjs`), and a planner without statistics still chose it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropIndex(['status', 'next_attempt_at']);
  });
  await knex.raw(`create index webhook_deliveries_due_index on webhook_deliveries (subscription_id, next_attempt_at)
    where next_attempt_at is not null`);
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.index(['status']);
  });
}
