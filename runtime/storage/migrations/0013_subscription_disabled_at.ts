import { Knex } from 'knex';

/**
 * `webhook_subscriptions.disabled_at`: when the delivery engine disabled the subscription
 * (answered as `disabledAt`, beside `lastSuccessAt` from `last_success_at`), so that an
 * integrator sees how long its stream has been stopped without reading the deliveries.
 * A subscription disabled before this migration gets the time of its last change, which is the
 * disabling unless its secret was rotated since: the closest this schema knew.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.string('disabled_at', 30);
  });
  await knex('webhook_subscriptions').where({ status: 'disabled' }).update({ disabled_at: knex.ref('updated_at') });
}
