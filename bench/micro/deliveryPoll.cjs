// How long the delivery engine's poll (anyDeliveryDue) takes while a paused subscription holds a
// backlog of due deliveries: a database migrated by the server's own migrations, one paused
// subscription with COUNT (default 200 000) pending deliveries due an hour ago, ACTIVE (default 20)
// active subscriptions with nothing due, then five polls.
// Usage: npm run build && node bench/micro/deliveryPoll.cjs sqlite:///tmp/poll.sqlite
//        (or a Postgres URL of an empty database); COUNT=… sets the backlog.
'use strict';
const path = require('node:path');
const DIST = path.join(__dirname, '..', '..', 'dist', 'runtime');
const { openDatabase } = require(path.join(DIST, 'storage', 'database.js'));
const { migrateLatest } = require(path.join(DIST, 'storage', 'migrate.js'));
const { anyDeliveryDue } = require(path.join(DIST, 'storage', 'repositories', 'webhookDeliveriesRepository.js'));

(async () => {
  const url = process.argv[2];
  if (!url) throw new Error('usage: node bench/micro/deliveryPoll.cjs <DATABASE_URL of an empty database>');
  const count = Number(process.env.COUNT ?? 200_000);
  const db = openDatabase(url);
  const k = db.knex;
  await migrateLatest(k);
  const past = new Date(Date.now() - 3_600_000).toISOString();
  await k('organizations').insert({ id: 'org_poll', name: 'poll', created_at: past });
  await k('webhook_subscriptions').insert({
    id: 'whs_paused', org_id: 'org_poll', partner: 'webhooks', trigger_key: 'log.created', match_key: 'log.created',
    target_url: 'https://hooks.example.com/paused', status: 'paused', secret: 'whsec_x', created_at: past, updated_at: past,
  });
  const active = Number(process.env.ACTIVE ?? 20);
  for (let i = 0; i < active; i++) {
    await k('webhook_subscriptions').insert({
      id: `whs_active_${i}`, org_id: 'org_poll', partner: 'webhooks', trigger_key: 'log.created', match_key: 'log.created',
      target_url: `https://hooks.example.com/active-${i}`, status: 'active', secret: 'whsec_x', created_at: past, updated_at: past,
    });
  }
  for (let i = 0; i < count; i += 500) {
    const rows = [];
    for (let j = i; j < Math.min(i + 500, count); j++) {
      rows.push({ id: `whd_poll_${j}`, org_id: 'org_poll', subscription_id: 'whs_paused', event_id: `evt_poll_${j}`, event_type: 'log.created', status: 'pending', attempts: 0, next_attempt_at: past, created_at: past, updated_at: past });
    }
    await k('webhook_deliveries').insert(rows);
  }
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint();
    const due = await anyDeliveryDue(k, new Date().toISOString());
    console.log(`poll ${round + 1}: due ${due}, ${(Number(process.hrtime.bigint() - start) / 1e6).toFixed(2)} ms`);
  }
  await db.close();
})();
