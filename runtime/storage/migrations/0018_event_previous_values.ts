import { Knex } from 'knex';

/**
 * `events.previous_values`: on update events, each changed field's value before the change (JSON
 * object keyed by the names in `changed_fields`), delivered as `previousValues` — what a consumer
 * needs to act on a transition ("status went from open to resolved") without keeping the resource
 * itself. Null on the other events, and on update events recorded before this migration.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('events', (t) => {
    t.text('previous_values');
  });
}
