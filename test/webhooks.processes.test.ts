import { Webhook } from 'standardwebhooks';
import { describeEachDatabase } from './support/testApp';
import { startWebhookReceiver, WebhookReceiver } from './support/webhookReceiver';
import { startWorkerProcess, WorkerProcess } from './support/workerProcess';
import { startServerProcess } from './support/serverProcess';

// The delivery engine as real processes (`npm run worker`) on one database: the queue lives in
// the database only, so a killed worker's claim is taken over after its lease, and two workers
// never send the same attempt twice.
const ENV = {
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  WEBHOOK_RETRY_SCHEDULE: '0,1,1',
  WEBHOOK_TIMEOUT_SECONDS: '5',
  WEBHOOK_LEASE_SECONDS: '6',
};
const HOOKS = '/v1/integrations/webhooks/subscriptions';

describeEachDatabase('webhook workers as processes', (t) => {
  let receiver: WebhookReceiver;
  const workers: WorkerProcess[] = [];
  beforeAll(async () => {
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await receiver?.close();
  });

  it('kill -9 of a worker in the middle of an attempt: another worker delivers it after the lease', async () => {
    const auth = await t.newKey({ organization: 'killed' });
    const sub = (await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/killed`, triggerKey: 'checkin.created' }).expect(201)).body;
    // the first attempt never gets an answer: the worker is killed while it waits
    receiver.answer((req, i) => (req.path === '/killed' && i === 0 ? { status: 200, hang: true } : { status: 200, body: 'ok' }));
    const first = await startWorkerProcess(t.db.url, ENV);
    workers.push(first);
    await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|k', siteId: 's' }).expect(201);
    const [attempt] = await receiver.waitFor(1, { path: '/killed' });
    await first.kill();
    const killedAt = Date.now();

    workers.push(await startWorkerProcess(t.db.url, ENV));
    const [, retry] = await receiver.waitFor(2, { path: '/killed', timeoutMs: 20_000 });
    expect(retry.headers['webhook-id']).toBe(attempt.headers['webhook-id']);
    new Webhook(sub.secret).verify(retry.body, retry.headers);
    // not before the lease of the killed worker ran out (6 s from its claim, which preceded the kill)
    expect(retry.at - attempt.at).toBeGreaterThanOrEqual(5_500);
    expect(retry.at).toBeGreaterThan(killedAt);
    const deadline = Date.now() + 5000;
    let delivery: any;
    do {
      delivery = (await t.http.get(`${HOOKS}/${sub.id}/deliveries`).set('Authorization', auth).expect(200)).body.data[0];
    } while (delivery.status !== 'succeeded' && Date.now() < deadline && (await new Promise((r) => setTimeout(r, 100)), true));
    // the cut attempt counts: the receiver may have had it
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2, lastResponseStatus: 200 });
  }, 60_000);

  it('kill -9 during the last attempt of the retry schedule: the delivery is abandoned with the reason, not sent for ever', async () => {
    // only the workers of this test: an earlier one left running could make the last attempt itself
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    const auth = await t.newKey({ organization: 'lost-last' });
    const sub = (await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/lost-last`, triggerKey: 'checkin.created' }).expect(201)).body;
    // the schedule has three attempts (ENV): two answered 500, the third never answered
    receiver.answer((req, i) => (req.path !== '/lost-last' ? { status: 200, body: 'ok' } : i < 2 ? { status: 500, body: 'down' } : { status: 200, hang: true }));
    const first = await startWorkerProcess(t.db.url, ENV);
    workers.push(first);
    await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|lost', siteId: 's' }).expect(201);
    await receiver.waitFor(3, { path: '/lost-last', timeoutMs: 15_000 });
    await first.kill();

    workers.push(await startWorkerProcess(t.db.url, ENV));
    const deadline = Date.now() + 20_000;
    let delivery: any;
    do {
      delivery = (await t.http.get(`${HOOKS}/${sub.id}/deliveries`).set('Authorization', auth).expect(200)).body.data[0];
    } while (delivery.status !== 'abandoned' && Date.now() < deadline && (await new Promise((r) => setTimeout(r, 200)), true));
    expect(delivery).toMatchObject({
      status: 'abandoned',
      attempts: 3,
      nextAttemptAt: null,
      lastResponseExcerpt: 'not sent again: the last attempt of its retry schedule got no stored outcome (the process sending it stopped, or stalled past its lease)',
    });
    // the second worker's polls go on: still nothing sent after the three attempts
    await new Promise((r) => setTimeout(r, 1500));
    expect(receiver.received.filter((r) => r.path === '/lost-last')).toHaveLength(3);
    // a receiver's failures disable a subscription, a stopped sender does not
    expect((await t.http.get(`${HOOKS}/${sub.id}`).set('Authorization', auth).expect(200)).body.status).toBe('active');
  }, 60_000);

  it('a server process (runtime/main.ts, what npm start runs) delivers by itself; with WEBHOOK_WORKER=off it sends nothing', async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop())); // the earlier tests' engines: none may run here
    receiver.answer(() => ({ status: 200, body: 'ok' }));
    const auth = await t.newKey({ organization: 'in-server' });
    const sub = (await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/in-server`, triggerKey: 'checkin.created' }).expect(201)).body;
    const checkinThrough = async (baseUrl: string) => {
      const res = await fetch(`${baseUrl}/v1/checkins`, { method: 'POST', headers: { Authorization: auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ userId: 'auth0|in-server', siteId: 's' }) });
      expect(res.status).toBe(201);
    };
    const quiet = await startServerProcess({ databaseUrl: t.db.url, env: { ...ENV, WEBHOOK_WORKER: 'off' } });
    try {
      await checkinThrough(quiet.baseUrl);
      await new Promise((r) => setTimeout(r, 1500)); // an engine polls far more often
      expect(receiver.received.filter((r) => r.path === '/in-server')).toEqual([]);
    } finally {
      await quiet.stop();
    }
    const serving = await startServerProcess({ databaseUrl: t.db.url, env: ENV });
    try {
      await checkinThrough(serving.baseUrl);
      const got = await receiver.waitFor(2, { path: '/in-server', timeoutMs: 10_000 }); // the waiting one, and the new one
      for (const r of got) expect(new Webhook(sub.secret).verify(r.body, r.headers)).toMatchObject({ type: 'checkin.created' });
    } finally {
      await serving.stop();
    }
  }, 60_000);

  it('SIGTERM lets the engine finish the attempt it has in flight: the delivery is recorded, exit 0', async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    receiver.answer((req) => (req.path === '/draining' ? { status: 200, body: 'ok', delayMs: 1500 } : { status: 200, body: 'ok' }));
    const auth = await t.newKey({ organization: 'draining' });
    const sub = (await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/draining`, triggerKey: 'checkin.created' }).expect(201)).body;
    const server = await startServerProcess({ databaseUrl: t.db.url, env: { ...ENV, SHUTDOWN_TIMEOUT_SECONDS: '20' } });
    const exited = server.exited;
    try {
      await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|draining', siteId: 's' }).expect(201);
      await receiver.waitFor(1, { path: '/draining', timeoutMs: 10_000 }); // the attempt is in flight, its answer 1.5 s away
      process.kill(server.pid, 'SIGTERM');
      expect(await exited).toEqual({ code: 0, signal: null });
    } finally {
      await server.stop();
    }
    const [delivery] = (await t.http.get(`${HOOKS}/${sub.id}/deliveries`).set('Authorization', auth).expect(200)).body.data;
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1, lastResponseStatus: 200 });
  }, 60_000);

  // Postgres claims with FOR UPDATE SKIP LOCKED, SQLite under its single writer: either way two
  // engines (WEB_CONCURRENCY=2 runs one per worker) never send the same attempt twice
  it('two worker processes on one database deliver each event exactly once', async () => {
    receiver.answer(() => ({ status: 200, body: 'ok' }));
    workers.push(...(await Promise.all([startWorkerProcess(t.db.url, ENV), startWorkerProcess(t.db.url, ENV)])));
    const auth = await t.newKey({ organization: 'two-workers' });
    const sub = (await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/shared`, triggerKey: 'checkin.created' }).expect(201)).body;
    const count = 60;
    await Promise.all(Array.from({ length: count }, (_, i) =>
      t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: `auth0|s${i}`, siteId: 's' }).expect(201)));
    await receiver.waitFor(count, { path: '/shared', timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 1500)); // a duplicate would arrive by now
    const ids = receiver.received.filter((r) => r.path === '/shared').map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(count);
    expect(new Set(ids).size).toBe(count);
    // and each delivery counts its one attempt once
    const deliveries = (await t.http.get(`${HOOKS}/${sub.id}/deliveries?limit=100`).set('Authorization', auth).expect(200)).body.data;
    expect(deliveries.map((d: { status: string; attempts: number }) => [d.status, d.attempts])).toEqual(Array.from({ length: count }, () => ['succeeded', 1]));
  }, 60_000);
}, ENV);
