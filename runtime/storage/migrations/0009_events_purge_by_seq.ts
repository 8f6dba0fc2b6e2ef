import { Knex } from 'knex';

/**
 * The retention purge finds expired events from the start of the feed's own order (`seq`, the
 * primary key) instead of through an index on `occurred_at`: events are recorded with the
 * time of their insert, in the order of their `seq`, so the oldest events by `seq` are the oldest
 * by time (eventsRepository.deleteEventsBefore). A replay's time window is turned into a range
 * of `seq` the same way (eventsRepository.eventIdsInWindow). Every write records an event, and
 * that index was one more B-tree page written per write.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('events', (t) => {
    t.dropIndex(['occurred_at']);
  });
}
