import { Knex } from 'knex';

/**
 * Each filter of a list, used alone, gets an index that hands over the organization's matching
 * rows already in the list's order: (org_id, <filter column>, <sort key>). A filtered page then
 * reads about `limit` rows and stops; without it the database either read every matching row
 * and sorted them (Postgres, where an index that does not end in `seq` says nothing of the
 * order within a value) or walked the whole organization in order, discarding what did not
 * match (SQLite) — a walk that never ends early when the value is rare or absent. Two filters at
 * once use one of these indexes and check the other on the rows it yields.
 *
 * - issues, runs, assets, schedules: one index per filter, ending in `seq`. (org_id, status)
 *   and (org_id, asset_id) of issues and (org_id, site_id) of assets go: the new index starts
 *   with the same columns and serves every query they served. (On SQLite they did give `seq`
 *   order, `seq` being the rowid every index ends in; Postgres has no such rule.)
 * - webhook subscriptions by status, and a subscription's deliveries by status.
 * - already served: check-ins, logs, users (`userId` is unique), the change feed (several
 *   `types` at once: eventsRepository.listEvents merges one ordered read per type). A
 *   subscription's event types are rows of webhook_subscription_types, which do not carry the
 *   subscription's `seq`: the few subscriptions that listen to a trigger are sorted.
 * - sensor readings, the ingest path: every index is paid for by every reading stored. The
 *   identity index (provider, sensor, metric, time) gave time order only with all three named,
 *   and on Postgres not even then (it does not end in `seq`). It is now unique on (org_id,
 *   sensor_external_id, occurred_at, provider, metric): the same identity (`ON CONFLICT` names
 *   columns, not their order), which also holds one sensor's readings by time; its readings of
 *   one instant (its metrics) are then put in `seq` order, a sort of those few rows
 *   (sensorReadingsRepository.listSensorReadings). A separate (org_id, sensor_external_id,
 *   occurred_at, seq) was the other way: sensors are many, so every batch writes all over such an
 *   index, and it cut the readings stored per second by about 40% in-process. The provider and
 *   metric indexes take new readings at the end of a few ranges each (readings arrive in time
 *   order); both together cost 8-12% more CPU per ingested batch (`npm run bench --
 *   --only=readings`, in-process and through the API).
 *
 * On Postgres an index is built under a lock that holds the table's writes (not its reads) until
 * the migration commits: on a large database this migration takes a while.
 */
export async function up(knex: Knex): Promise<void> {
  const byFilter = async (table: string, columns: readonly string[], drop: readonly string[][] = []) => {
    await knex.schema.alterTable(table, (t) => {
      for (const index of drop) t.dropIndex([...index]);
      for (const column of columns) t.index(['org_id', column, 'seq']);
    });
  };
  await byFilter('issues', ['status', 'priority', 'site_id', 'asset_id', 'run_id', 'assignee_user_id'], [['org_id', 'status'], ['org_id', 'asset_id']]);
  await byFilter('runs', ['status', 'site_id', 'template_id', 'user_id']);
  await byFilter('assets', ['site_id', 'asset_type', 'status'], [['org_id', 'site_id']]);
  await byFilter('schedules', ['site_id', 'assignee_user_id', 'template_id']);

  await knex.schema.alterTable('webhook_subscriptions', (t) => {
    t.index(['org_id', 'partner', 'status', 'seq']);
  });
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.index(['subscription_id', 'status', 'seq']);
  });

  // The new identity index is built before the old one goes, so duplicates stay refused
  // throughout. It is a plain unique index: on Postgres building it holds the table's writes but
  // not its reads, where adding a unique constraint locks reads out too. Dropping the old
  // constraint does take the table's exclusive lock; it comes last, so that lock is held only
  // from there to the migration's commit.
  await knex.schema.alterTable('sensor_readings', (t) => {
    t.unique(['org_id', 'sensor_external_id', 'occurred_at', 'provider', 'metric'], { indexName: 'sensor_readings_identity', useConstraint: false });
    t.index(['org_id', 'provider', 'occurred_at', 'seq'], 'sensor_readings_provider_time');
    t.index(['org_id', 'metric', 'occurred_at', 'seq'], 'sensor_readings_metric_time');
  });
  await knex.schema.alterTable('sensor_readings', (t) => {
    t.dropUnique(['org_id', 'provider', 'sensor_external_id', 'metric', 'occurred_at'], 'sensor_readings_dedup');
  });
}
