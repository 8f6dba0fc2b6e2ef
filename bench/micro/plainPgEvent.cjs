// Preloaded into the server with events by `PRELOAD=bench/micro/plainPgEvent.cjs
// MICRO_POSTGRES_URL=… node bench/micro/eventsServers.cjs`: on Postgres the event is recorded by a
// plain insert — no event lock, no delivery queued — instead of the statement
// webhookDeliveriesRepository.insertEventAndQueueDeliveries sends. The most that making that
// statement cheaper could save; not a correct server (no deliveries, and the feed's order then
// rests on the group commit's organization lock alone).
'use strict';
const path = require('node:path');
const DIST = path.join(__dirname, '..', '..', 'dist', 'runtime');
const repository = require(path.join(DIST, 'storage', 'repositories', 'webhookDeliveriesRepository.js'));
const { sendInTransaction } = require(path.join(DIST, 'storage', 'database.js'));

const shipped = repository.insertEventAndQueueDeliveries;
const PLAIN_INSERT = `insert into events (id, org_id, type, resource_id, data, changed_fields, occurred_at)
  values (?, ?, ?, ?, ?, ?, to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;
repository.insertEventAndQueueDeliveries = async (db, row, now) => {
  if (db.client.config.client !== 'pg') return shipped(db, row, now);
  await sendInTransaction(db, PLAIN_INSERT, [row.id, row.org_id, row.type, row.resource_id, row.data, row.changed_fields]);
};
