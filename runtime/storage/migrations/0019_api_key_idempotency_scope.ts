import { Knex } from 'knex';

/**
 * `api_keys.idempotency_scope`: whose Idempotency-Keys a key's requests use. A rolled key
 * (`npm run keys -- roll`) takes the scope of the key it was rolled from — the id of the first key
 * of the chain, which every key rolled from it, directly or not, shares — so that a client moving to the new secret
 * while a write is still pending gets that write's answer replayed on its retry instead of
 * running it again. Null: the key's own id (every key before this migration, and every key made
 * by `create`). The stored Idempotency-Keys are unchanged: their `api_key_id` holds the scope,
 * which for every existing key is its id.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.string('idempotency_scope', 40);
  });
}
