import { Knex } from 'knex';

/**
 * `api_keys.expires_at`: a key may be made to expire (`npm run keys -- create --expires-in 90d`),
 * and rolling a key (`npm run keys -- roll`) gives the old one an expiry, so that clients can
 * move to the new secret before the old one stops working. Null: never expires (every key
 * before this migration).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.string('expires_at', 30);
  });
}
