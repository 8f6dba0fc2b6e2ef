import { Knex } from 'knex';

/**
 * `webhook_deliveries.schedule_started_at`: when the delivery's current retry schedule began, set
 * when it begins again (the delivery sent again on request, its subscription re-enabled or moved
 * to a new target); null while the schedule is the one it was made with, which began at
 * `created_at` (so recording an event writes no more than before). The delivery engine's time
 * rule of disabling counts from the first attempt of the current schedule
 * (runtime/webhooks/deliveryWorker.ts, docs/webhooks.md "Retries and disabling"). A delivery whose
 * schedule began again before this migration counts from when it was made.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.string('schedule_started_at', 30);
  });
}
