import { describeEachDatabase } from './support/testApp';
import { WEBHOOK_BACKLOG_COUNT_CAP } from '../runtime/observability/metrics';
import { startWebhookReceiver, WebhookReceiver } from './support/webhookReceiver';
import { startDeliveryWorker, DeliveryWorker } from '../runtime/webhooks/deliveryWorker';

describeEachDatabase('GET /metrics', (t) => {
  it('Prometheus text: requests by operation and status, duration, in flight, replays, idempotency 409s, database pool', async () => {
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'metrics-1').send({ name: 'Metered' }).expect(201);
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'metrics-1').send({ name: 'Metered' }).expect(201);
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'metrics-1').send({ name: 'Other' }).expect(409);
    // the probes count under their own operations, never as an API operation's or "none"'s answers
    await t.http.get('/healthz').expect(200);
    await t.http.get('/readyz').expect(200);
    const res = await t.http.get('/metrics').expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.text).toMatch(/^http_requests_total\{operation="getHealth",status="200"\} [1-9]\d*$/m);
    expect(res.text).toMatch(/^http_requests_total\{operation="getReadiness",status="200"\} [1-9]\d*$/m);
    const text = res.text;
    expect(text).toMatch(/^http_requests_total\{operation="createSite",status="201"\} [2-9]\d*$/m);
    expect(text).toMatch(/^http_requests_total\{operation="createSite",status="409"\} [1-9]\d*$/m);
    expect(text).toMatch(/^http_request_duration_seconds_bucket\{le="0\.1",operation="createSite",status="201"\} \d+$/m);
    expect(text).toMatch(/^http_requests_in_flight \d+$/m);
    expect(text).toMatch(/^idempotent_replays_total [1-9]\d*$/m);
    expect(text).toMatch(/^idempotency_conflicts_total\{code="IDEMPOTENCY_KEY_REUSED"\} [1-9]\d*$/m);
    expect(text).toMatch(/^# TYPE rate_limited_requests_total counter$/m);
    for (const state of ['used', 'free', 'pending', 'max']) expect(text).toMatch(new RegExp(`^db_pool_connections\\{state="${state}"\\} \\d+$`, 'm'));
    expect(text).toMatch(/^process_cpu_seconds_total /m);
  });

  it('needs the METRICS_TOKEN as a bearer token when it is set', async () => {
    const guarded = t.anotherApp({ METRICS_TOKEN: 'scrape-secret' });
    const refused = await guarded.http.get('/metrics').expect(401);
    expect(refused.body.code).toBe('UNAUTHENTICATED');
    await guarded.http.get('/metrics').set('Authorization', 'Bearer wrong').expect(401);
    const ok = await guarded.http.get('/metrics').set('Authorization', 'Bearer scrape-secret').expect(200);
    expect(ok.text).toMatch(/^# TYPE http_requests_total counter$/m);
  });
});

describeEachDatabase('GET /metrics: webhook deliveries', (t) => {
  const HOOKS = '/v1/integrations/webhooks/subscriptions';
  let receiver: WebhookReceiver;
  let worker: DeliveryWorker;
  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    worker = startDeliveryWorker({ db: t.db.knex, settings: t.config, pollIntervalMs: 50 });
    t.onClose(async () => {
      await worker.stop();
      await receiver.close();
    });
  });
  const metric = async (line: RegExp) => {
    const text = (await t.http.get('/metrics').expect(200)).text;
    const match = text.match(line);
    return match ? Number(match[1]) : 0;
  };

  it('counts attempts by outcome and reports the undelivered backlog', async () => {
    const subscribe = async (path: string) =>
      (await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: receiver.url + path, eventTypes: ['checkin.created'] }).expect(201)).body;
    const succeededBefore = await metric(/^webhook_delivery_attempts_total\{outcome="succeeded"\} (\d+)$/m);
    await subscribe('/ok');
    const held = await subscribe('/held');
    await t.http.patch(`${HOOKS}/${held.id}`).set('Authorization', t.auth).send({ status: 'paused' }).expect(200);

    await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: 'auth0|metrics', siteId: 'site_metered' }).expect(201);
    await receiver.waitFor(1, { path: '/ok' });
    // the outcome is stored (and counted) just after the receiver answered
    let succeeded = succeededBefore;
    for (let i = 0; i < 50 && succeeded === succeededBefore; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      succeeded = await metric(/^webhook_delivery_attempts_total\{outcome="succeeded"\} (\d+)$/m);
    }
    expect(succeeded).toBe(succeededBefore + 1);
    // the paused subscription's delivery waits: it is the backlog
    expect(await metric(/^webhook_deliveries_pending (\d+)$/m)).toBe(1);

    // a backlog past the count's cap reads as the cap (README, "Metrics"); rows of a subscription
    // that does not exist, which no worker claims
    const now = new Date().toISOString();
    const rows = Array.from({ length: WEBHOOK_BACKLOG_COUNT_CAP + 20 }, (_, i) => ({
      id: `whd_backlog${String(i).padStart(17, '0')}`, org_id: 'org_backlog', subscription_id: 'whs_backlog', event_id: `evt_backlog${i}`,
      event_type: 'checkin.created', status: 'pending', attempts: 0, next_attempt_at: now, created_at: now, updated_at: now,
    }));
    await t.db.knex.batchInsert('webhook_deliveries', rows, 400);
    try {
      expect(await metric(/^webhook_deliveries_pending (\d+)$/m)).toBe(WEBHOOK_BACKLOG_COUNT_CAP);
      await t.db.knex('webhook_deliveries').where({ subscription_id: 'whs_backlog' }).whereIn('id', rows.slice(0, 10).map((r) => r.id)).delete();
      // 1 + 10 000 + 20 − 10 is still past it; below it the count is exact again
      expect(await metric(/^webhook_deliveries_pending (\d+)$/m)).toBe(WEBHOOK_BACKLOG_COUNT_CAP);
      await t.db.knex('webhook_deliveries').where({ subscription_id: 'whs_backlog' }).whereIn('id', rows.slice(10, 110).map((r) => r.id)).delete();
      expect(await metric(/^webhook_deliveries_pending (\d+)$/m)).toBe(1 + WEBHOOK_BACKLOG_COUNT_CAP + 20 - 110);
    } finally {
      await t.db.knex('webhook_deliveries').where({ subscription_id: 'whs_backlog' }).delete();
    }
  });

  it('counts a failed attempt (retried later) and an abandoned one (410)', async () => {
    const failed = /^webhook_delivery_attempts_total\{outcome="failed"\} (\d+)$/m;
    const abandoned = /^webhook_delivery_attempts_total\{outcome="abandoned"\} (\d+)$/m;
    const before = { failed: await metric(failed), abandoned: await metric(abandoned) };
    receiver.answer((req, i) => (req.path === '/flaky' ? { status: i === 0 ? 500 : 410 } : { status: 200, body: 'ok' }));
    await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: `${receiver.url}/flaky`, eventTypes: ['site.created'] }).expect(201);
    await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Counted twice' }).expect(201);
    await receiver.waitFor(2, { path: '/flaky' }); // WEBHOOK_RETRY_SCHEDULE below: the retry after 1 s
    let counted = before;
    for (let i = 0; i < 50 && counted.abandoned === before.abandoned; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      counted = { failed: await metric(failed), abandoned: await metric(abandoned) };
    }
    expect(counted).toEqual({ failed: before.failed + 1, abandoned: before.abandoned + 1 });
  });

  it('counts a delivery given up when it came due, by reason (its event purged)', async () => {
    const givenUp = /^webhook_deliveries_given_up_total\{reason="event_purged"\} (\d+)$/m;
    const before = await metric(givenUp);
    const subscription = (await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: `${receiver.url}/purged`, eventTypes: ['site.deleted'] }).expect(201)).body;
    const { org_id: orgId } = await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).first('org_id');
    const past = new Date(Date.now() - 60_000).toISOString();
    // due, and its event is not there (as when the retention purged it before the delivery went out)
    await t.db.knex('webhook_deliveries').insert({
      id: 'whd_metric_purged', org_id: orgId, subscription_id: subscription.id, event_id: 'evt_metric_purged', event_type: 'site.deleted', status: 'pending',
      attempts: 0, next_attempt_at: past, created_at: past, updated_at: past,
    });
    let counted = before;
    for (let i = 0; i < 100 && counted === before; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      counted = await metric(givenUp);
    }
    expect(counted).toBe(before + 1);
    expect(await t.db.knex('webhook_deliveries').where({ id: 'whd_metric_purged' }).first('status')).toEqual({ status: 'abandoned' });
    expect(receiver.received.filter((r) => r.path === '/purged')).toEqual([]);
  });
}, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_SCHEDULE: '0,1' });
