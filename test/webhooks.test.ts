import dns from 'node:dns';
import { Webhook } from 'standardwebhooks';
import { describeEachDatabase, anError, anId, aTimestamp, TestContext } from './support/testApp';
import { startWebhookReceiver, WebhookReceiver } from './support/webhookReceiver';
import type { Knex } from 'knex';
import { startDeliveryWorker, DeliveryWorker } from '../runtime/webhooks/deliveryWorker';
import { deleteDeliveriesBefore } from '../runtime/storage/repositories/webhookDeliveriesRepository';
import { loadConfig } from '../runtime/config';

// Delivery through the real engine to a real local receiver, which verifies every request with
// the `standardwebhooks` package as a real receiver would. Short schedule, timeout and lease.
const ENV = {
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  WEBHOOK_RETRY_SCHEDULE: '0,1,1',
  WEBHOOK_TIMEOUT_SECONDS: '1',
  WEBHOOK_LEASE_SECONDS: '3',
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const HOOKS = '/v1/integrations/webhooks/subscriptions';

/**
 * The server's resolver (the subscribe-time address check) answering some hosts as `answer` says;
 * a host it answers undefined for resolves as usual. Restore with the spy's mockRestore().
 */
function stubResolver(answer: (host: string) => Promise<dns.LookupAddress[]> | undefined) {
  const resolve = dns.promises.lookup.bind(dns.promises);
  return jest.spyOn(dns.promises, 'lookup').mockImplementation(((host: string, options: dns.LookupAllOptions) =>
    answer(host) ?? resolve(host, options)) as typeof dns.promises.lookup);
}

describeEachDatabase('webhook delivery', (t) => {
  let receiver: WebhookReceiver;
  let worker: DeliveryWorker;
  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV }), pollIntervalMs: 50 });
    // the worker uses the suite's database: stop it before the database closes
    t.onClose(async () => {
      await worker.stop();
      await receiver.close();
    });
  });

  /** A fresh organization (its own events) with a subscription to `types` at receiver path `path`. */
  async function setup(path: string, types: string[] | string) {
    const auth = await t.newKey({ organization: `org-${path.slice(1)}` });
    const body = typeof types === 'string' ? { triggerKey: types } : { eventTypes: types };
    const res = await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: receiver.url + path, ...body }).expect(201);
    return { auth, subscription: res.body as { id: string; secret: string } };
  }
  const checkin = async (auth: string, userId = 'auth0|worker') =>
    (await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId, siteId: 'site_somewhere' }).expect(201)).body;
  const deliveries = async (auth: string, subscriptionId: string) =>
    (await t.http.get(`${HOOKS}/${subscriptionId}/deliveries`).set('Authorization', auth).expect(200)).body.data;
  /** Reads every 100 ms until `done` holds for what `read` answers, and answers that; fails after `timeoutMs`, saying `what` with the last read. */
  async function readUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (done(value)) return value;
      if (Date.now() > deadline) throw new Error(`${what}: ${JSON.stringify(value)}`);
      await sleep(100);
    }
  }
  /**
   * Runs `work` with the suite's delivery engine stopped (the test plays an engine, or writes
   * rows no engine may touch meanwhile), and starts it again after, whatever `work` did.
   */
  async function whileEngineStopped(work: () => Promise<void>): Promise<void> {
    await worker.stop();
    try {
      await work();
    } finally {
      worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV }), pollIntervalMs: 50 });
    }
  }
  /** Postgres: waits until a statement of another session waits for a lock `holder` (a transaction) holds. */
  async function untilBlockedBy(holder: Knex.Transaction, what: string): Promise<void> {
    const { pid } = (await holder.raw('select pg_backend_pid() as pid')).rows[0];
    await readUntil(async () => Number((await t.db.knex.raw('select count(*) as n from pg_stat_activity where ? = any(pg_blocking_pids(pid))', [pid])).rows[0].n),
      (waiting) => waiting > 0, what, 10_000);
  }
  /**
   * Postgres: runs `play` in a transaction of a second connection (another process's, as the
   * engine's or a purge's would be), rolled back if `play` fails before committing it, so that no
   * request is left waiting for its locks.
   */
  async function inAnotherTransaction(play: (trx: Knex.Transaction) => Promise<void>): Promise<void> {
    const other = t.db.openAnother();
    const trx = await other.knex.transaction();
    try {
      await play(trx);
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
      await other.close();
    }
  }
  /** Waits until the subscription's deliveries satisfy `done`. */
  const deliveriesWhen = (auth: string, subscriptionId: string, done: (list: any[]) => boolean, timeoutMs = 10_000) =>
    readUntil(() => deliveries(auth, subscriptionId), done, 'deliveries never reached the expected state', timeoutMs);

  it('subscribes once per target and types, and delivers a signed event the receiver verifies with standardwebhooks', async () => {
    const { auth, subscription } = await setup('/signed', 'checkin.created');
    expect(subscription).toEqual({
      id: anId('whs'), partner: 'webhooks', triggerKey: 'checkin.created', eventTypes: ['checkin.created'], targetUrl: `${receiver.url}/signed`,
      status: 'active', disabledReason: null, disabledAt: null, lastSuccessAt: null, createdAt: aTimestamp(), updatedAt: aTimestamp(),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/=]+$/),
    });
    const again = await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/signed`, eventTypes: ['checkin.created'] }).expect(200);
    const { secret: _secret, ...withoutSecret } = subscription;
    expect(again.body).toEqual(withoutSecret);

    const created = await checkin(auth);
    const [request] = await receiver.waitFor(1, { path: '/signed' });
    const payload = new Webhook(subscription.secret).verify(request.body, request.headers) as any;
    const event = (await t.http.get(`/v1/events?resourceId=${created.id}`).set('Authorization', auth).expect(200)).body.data[0];
    expect(payload).toEqual({ id: event.id, type: 'checkin.created', timestamp: event.occurredAt, sequence: event.sequence, data: created });
    expect(request.headers['webhook-id']).toBe(event.id);
    expect(request.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    expect(() => new Webhook(`whsec_${Buffer.from('another secret').toString('base64')}`).verify(request.body, request.headers)).toThrow();

    const list = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    expect(list).toEqual([{
      id: anId('whd'), subscriptionId: subscription.id, eventId: event.id, eventType: 'checkin.created', status: 'succeeded', attempts: 1,
      lastResponseStatus: 200, lastResponseExcerpt: 'ok', lastAttemptAt: aTimestamp(), nextAttemptAt: null, createdAt: aTimestamp(), updatedAt: aTimestamp(),
    }]);
    // the subscription tells when its latest delivery succeeded: when that attempt finished
    const after = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
    expect(after).toMatchObject({ lastSuccessAt: list[0].lastAttemptAt, disabledAt: null });
  });

  it('records an answer with a NUL and other control characters (a binary body) as succeeded, showing them as U+FFFD', async () => {
    const { auth, subscription } = await setup('/binary', 'checkin.created');
    receiver.answer((req) => (req.path === '/binary' ? { status: 200, body: 'ok\u0000\u0001\u001f\tend' } : { status: 200, body: 'ok' }));
    await checkin(auth);
    const [delivery] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ attempts: 1, lastResponseStatus: 200, lastResponseExcerpt: 'ok\uFFFD\uFFFD\uFFFD\tend' });
    expect(receiver.received.filter((r) => r.path === '/binary')).toHaveLength(1);
  });

  it('retries after a 500 with the same webhook-id, and follows no redirect', async () => {
    const { auth, subscription } = await setup('/flaky', 'checkin.created');
    receiver.answer((req, i) => (req.path === '/flaky' ? (i === 0 ? { status: 500, body: 'boom' } : i === 1 ? { status: 302, headers: { location: '/elsewhere' } } : { status: 204 }) : { status: 200, body: 'ok' }));
    await checkin(auth);
    const requests = await receiver.waitFor(3, { path: '/flaky' });
    expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of requests) new Webhook(subscription.secret).verify(r.body, r.headers);
    const [delivery] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ attempts: 3, lastResponseStatus: 204 });
    expect(receiver.received.filter((r) => r.path === '/elsewhere')).toEqual([]);

    // the delivery with each attempt's outcome, oldest first
    const one = (await t.http.get(`${HOOKS}/${subscription.id}/deliveries/${delivery.id}`).set('Authorization', auth).expect(200)).body;
    const { attemptHistory, ...asListed } = one;
    expect(asListed).toEqual(delivery);
    expect(attemptHistory).toEqual([
      { attempt: 1, targetUrl: `${receiver.url}/flaky`, startedAt: aTimestamp(), durationMs: expect.any(Number), outcome: 'failed', responseStatus: 500, responseExcerpt: 'boom' },
      { attempt: 2, targetUrl: `${receiver.url}/flaky`, startedAt: aTimestamp(), durationMs: expect.any(Number), outcome: 'failed', responseStatus: 302, responseExcerpt: '' },
      { attempt: 3, targetUrl: `${receiver.url}/flaky`, startedAt: aTimestamp(), durationMs: expect.any(Number), outcome: 'succeeded', responseStatus: 204, responseExcerpt: '' },
    ]);
    // each started when the receiver saw it, the last finishing when the delivery's outcome was stored
    attemptHistory.forEach((a: any, i: number) => expect(Math.abs(Date.parse(a.startedAt) - requests[i].at)).toBeLessThan(1000));
    expect(Date.parse(attemptHistory[2].startedAt) + attemptHistory[2].durationMs).toBe(Date.parse(delivery.lastAttemptAt));
    // another subscription's delivery, or none: 404
    const other = await setup('/flaky-other', 'site.created');
    await t.http.get(`${HOOKS}/${other.subscription.id}/deliveries/${delivery.id}`).set('Authorization', other.auth).expect(404);
    await t.http.get(`${HOOKS}/${subscription.id}/deliveries/whd_nothing`).set('Authorization', auth).expect(404);
  });

  it.each([503, 429])('waits at least the Retry-After of a %i', async (status) => {
    const path = `/busy-${status}`;
    const { auth, subscription } = await setup(path, 'checkin.created');
    receiver.answer((req, i) => (req.path === path && i === 0 ? { status, headers: { 'retry-after': '2' } } : { status: 200, body: 'ok' }));
    await checkin(auth);
    const [first, second] = await receiver.waitFor(2, { path });
    // the schedule alone would retry after about 1 s
    expect(second.at - first.at).toBeGreaterThanOrEqual(1900);
    await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
  });

  it('gives up an attempt after WEBHOOK_TIMEOUT_SECONDS and retries it', async () => {
    const { auth, subscription } = await setup('/slow', 'checkin.created');
    receiver.answer((req, i) => (req.path === '/slow' && i === 0 ? { status: 200, delayMs: 2500 } : { status: 200, body: 'ok' }));
    await checkin(auth);
    const failed = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.lastAttemptAt != null); // its first outcome is stored
    expect(failed[0]).toMatchObject({ lastResponseStatus: null, lastResponseExcerpt: expect.stringContaining('timed out') });
    const [done] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    const { attemptHistory } = (await t.http.get(`${HOOKS}/${subscription.id}/deliveries/${done.id}`).set('Authorization', auth).expect(200)).body;
    expect(attemptHistory).toEqual([
      { attempt: 1, targetUrl: `${receiver.url}/slow`, startedAt: aTimestamp(), durationMs: expect.any(Number), outcome: 'failed', responseStatus: null, responseExcerpt: failed[0].lastResponseExcerpt },
      { attempt: 2, targetUrl: `${receiver.url}/slow`, startedAt: aTimestamp(), durationMs: expect.any(Number), outcome: 'succeeded', responseStatus: 200, responseExcerpt: 'ok' },
    ]);
    expect(attemptHistory[0].durationMs).toBeGreaterThanOrEqual(1000); // WEBHOOK_TIMEOUT_SECONDS
    expect(attemptHistory[0].durationMs).toBeLessThan(5000); // not the receiver's 2.5 s
  });

  it('judges an answer whose body did not end within the timeout by its status: a 200 succeeds, a 500 is retried', async () => {
    const { auth, subscription } = await setup('/slow-body', 'checkin.created');
    receiver.answer((req, i) => (req.path === '/slow-body' ? { status: i === 0 ? 500 : 200, body: i === 0 ? 'busy…' : 'accepted, more to come', hangBody: true } : { status: 200, body: 'ok' }));
    await checkin(auth);
    const [delivery] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ attempts: 2, lastResponseStatus: 200, lastResponseExcerpt: 'accepted, more to come [the rest of the answer did not arrive: timed out after 1 s]' });
    const { attemptHistory } = (await t.http.get(`${HOOKS}/${subscription.id}/deliveries/${delivery.id}`).set('Authorization', auth).expect(200)).body;
    expect(attemptHistory.map((a: any) => [a.outcome, a.responseStatus, a.responseExcerpt])).toEqual([
      ['failed', 500, 'busy… [the rest of the answer did not arrive: timed out after 1 s]'],
      ['succeeded', 200, 'accepted, more to come [the rest of the answer did not arrive: timed out after 1 s]'],
    ]);
    // the timeout's timer may fire a millisecond before Date.now() says 1 s passed
    expect(attemptHistory.every((a: any) => a.durationMs >= 990)).toBe(true);
  });

  it('disables the subscription on 410, keeps its undelivered events listed, and sends them when set active again', async () => {
    const { auth, subscription } = await setup('/gone', 'checkin.created');
    let gone = true;
    receiver.answer((req) => (req.path === '/gone' && gone ? { status: 410 } : { status: 200, body: 'ok' }));
    await checkin(auth);
    await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'abandoned');
    const disabled = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
    expect(disabled).toMatchObject({ status: 'disabled', disabledReason: 'gone', disabledAt: aTimestamp(), lastSuccessAt: null });
    const [gave] = await deliveries(auth, subscription.id);
    expect(disabled.disabledAt).toBe(gave.updatedAt); // disabled by the attempt answered 410, in its transaction

    gone = false;
    const before = receiver.received.filter((r) => r.path === '/gone').length;
    const list = await deliveries(auth, subscription.id);
    await t.http.post(`${HOOKS}/${subscription.id}/deliveries/${list[0].id}/retry`).set('Authorization', auth).expect(202);
    await sleep(500);
    expect(receiver.received.filter((r) => r.path === '/gone').length).toBe(before); // disabled: nothing goes out
    // an event recorded while disabled is not queued for it (docs/webhooks.md, "Retries and disabling")
    const whileDisabled = await checkin(auth);
    expect(await deliveries(auth, subscription.id)).toHaveLength(1);
    const active = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    expect(active.body).toMatchObject({ status: 'active', disabledReason: null, disabledAt: null, lastSuccessAt: null });
    await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    expect(await deliveries(auth, subscription.id)).toHaveLength(1);
    // …and the replay of the window since it was disabled (its disabledAt) sends it
    await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth)
      .send({ from: disabled.disabledAt, to: new Date(Date.now() + 1000).toISOString() }).expect(202);
    await deliveriesWhen(auth, subscription.id, (l) => l.length === 2 && l.every((d) => d.status === 'succeeded'));
    expect(receiver.received.some((r) => r.path === '/gone' && JSON.parse(r.body).data.id === whileDisabled.id)).toBe(true);
  });

  it('disables a subscription whose whole retry schedule failed (failing), the delivery abandoned; re-enabled, it sends that one again with a new schedule', async () => {
    const { auth, subscription } = await setup('/down', 'checkin.created');
    let down = true;
    receiver.answer((req) => (req.path === '/down' && down ? { status: 500, body: 'down' } : { status: 200, body: 'ok' }));
    const created = await checkin(auth);
    const [delivery] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'abandoned');
    expect(delivery).toMatchObject({ attempts: 3, lastResponseStatus: 500, lastResponseExcerpt: 'down', nextAttemptAt: null });
    const res = await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200);
    expect(res.body).toMatchObject({ status: 'disabled', disabledReason: 'failing' });

    down = false;
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const [sent] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    expect(sent).toMatchObject({ id: delivery.id, attempts: 1, lastResponseStatus: 200 });
    const received = receiver.received.filter((r) => r.path === '/down').map((r) => JSON.parse(r.body).data.id);
    expect(received).toEqual([created.id, created.id, created.id, created.id]);
  });

  describe('the time rule of failing: nothing succeeded for as long as the schedule lasts (2 s here)', () => {
    const subscriptionOf = async (auth: string, id: string) => (await t.http.get(`${HOOKS}/${id}`).set('Authorization', auth).expect(200)).body;
    const disabled = (auth: string, id: string) => readUntil(() => subscriptionOf(auth, id), (body) => body.status === 'disabled', 'subscription never disabled', 15_000);
    /** The subscription's only delivery once `count` of its attempts got an outcome (with its attemptHistory). */
    async function attemptsOf(auth: string, id: string, count: number) {
      const [delivery] = await deliveriesWhen(auth, id, (l) => l.length === 1);
      const one = async () => (await t.http.get(`${HOOKS}/${id}/deliveries/${delivery.id}`).set('Authorization', auth).expect(200)).body;
      return readUntil(one, (body) => body.attemptHistory.length >= count, `never ${count} attempts`, 15_000);
    }
    const stalling = (path: string) => receiver.answer((req) => (req.path === path ? { status: 503, headers: { 'retry-after': '3' } } : { status: 200, body: 'ok' }));

    it('disables at an attempt before its delivery\'s last, when a Retry-After kept that delivery from its last attempt', async () => {
      const { auth, subscription } = await setup('/stalling', 'checkin.created');
      stalling('/stalling');
      await checkin(auth);
      // the second attempt waits 3 s (the Retry-After), longer than the whole schedule lasts
      expect(await disabled(auth, subscription.id)).toMatchObject({ disabledReason: 'failing', disabledAt: aTimestamp() });
      const [delivery] = await deliveries(auth, subscription.id);
      expect(delivery).toMatchObject({ status: 'failed', attempts: 2, lastResponseStatus: 503, nextAttemptAt: null });
    });

    it('counts from the subscription\'s last change (a resume), then the delivery\'s last attempt disables it as before', async () => {
      const { auth, subscription } = await setup('/stalling-resumed', 'checkin.created');
      stalling('/stalling-resumed');
      await checkin(auth);
      const [first] = await receiver.waitFor(1, { path: '/stalling-resumed' });
      await sleep(Math.max(0, first.at + 2300 - Date.now()));
      await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
      await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
      // the second attempt (3 s after the first) failed about 0.7 s after the resume: not yet 2 s
      expect(await attemptsOf(auth, subscription.id, 2)).toMatchObject({ status: 'failed', attempts: 2 });
      expect(await subscriptionOf(auth, subscription.id)).toMatchObject({ status: 'active' });
      // the third is the schedule's last, and nothing succeeded since the delivery was made
      expect(await disabled(auth, subscription.id)).toMatchObject({ disabledReason: 'failing' });
      expect((await deliveries(auth, subscription.id))[0]).toMatchObject({ status: 'abandoned', attempts: 3 });
    });

    it('counts a delivery sent again on request from the first attempt of its new schedule, also when that one\'s outcome was lost', async () => {
      const { auth, subscription } = await setup('/sent-again', 'checkin.created');
      receiver.answer((req) => (req.path === '/sent-again' ? { status: 500, body: 'no' } : { status: 200, body: 'ok' }));
      await checkin(auth);
      const [given] = await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'abandoned');
      // as a subscription left active when that delivery was given up (its last attempt cut off on our side)
      await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).update({ status: 'active', disabled_reason: null, disabled_at: null });
      // sent again while the engine is stopped, longer than the schedule lasts
      await worker.stop();
      await t.http.post(`${HOOKS}/${subscription.id}/deliveries/${given.id}/retry`).set('Authorization', auth).expect(202);
      await sleep(2500);
      worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV }), pollIntervalMs: 50 });
      // the new schedule's first attempt, its outcome then lost as with a process killed during it
      await attemptsOf(auth, subscription.id, 4);
      const firstOfNew = await t.db.knex('webhook_delivery_attempts').where({ delivery_id: given.id }).orderBy('seq', 'desc').first('seq', 'attempt');
      expect(firstOfNew.attempt).toBe(1);
      await t.db.knex('webhook_delivery_attempts').where({ seq: firstOfNew.seq }).delete();
      // its second attempt fails about 1 s after the first: not counted from the earlier schedule
      expect(await attemptsOf(auth, subscription.id, 4)).toMatchObject({ status: 'failed', attempts: 2 });
      expect(await subscriptionOf(auth, subscription.id)).toMatchObject({ status: 'active' });
      // its new schedule's last attempt disables it, as before
      expect(await disabled(auth, subscription.id)).toMatchObject({ disabledReason: 'failing' });
    });

    it('does not count the time a delivery waited for its first attempt (the engine stopped)', async () => {
      const { auth, subscription } = await setup('/after-outage', 'checkin.created');
      receiver.answer((req) => (req.path === '/after-outage' ? { status: 500, body: 'no' } : { status: 200, body: 'ok' }));
      await worker.stop();
      await checkin(auth);
      await sleep(2500); // longer than the schedule lasts
      worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV }), pollIntervalMs: 50 });
      // its first attempt, 2.5 s after it was made, does not disable it; its last one does
      expect(await disabled(auth, subscription.id)).toMatchObject({ disabledReason: 'failing' });
      expect((await deliveries(auth, subscription.id))[0]).toMatchObject({ status: 'abandoned', attempts: 3 });
    });
  });

  it('a receiver down past the whole schedule catches up from the feed after the last webhook-id it processed, losing nothing', async () => {
    const types = ['checkin.created', 'checkin.activated'];
    const { auth, subscription } = await setup('/outage', types);
    let down = false;
    receiver.answer((req) => (req.path === '/outage' && down ? { status: 500, body: 'down' } : { status: 200, body: 'ok' }));
    const processed: string[] = []; // what the receiver stored, by webhook-id
    const first = await checkin(auth, 'auth0|before');
    const [request] = await receiver.waitFor(1, { path: '/outage' });
    processed.push((new Webhook(subscription.secret).verify(request.body, request.headers) as { id: string }).id);
    await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');

    down = true;
    const during = [await checkin(auth, 'auth0|during-1'), await checkin(auth, 'auth0|during-2')];
    await t.http.patch(`/v1/checkins/${first.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Not subscribed to' }).expect(201);
    // the first delivery to fail its whole schedule disables the subscription; the others wait, listed
    await deliveriesWhen(auth, subscription.id, (l) => l.some((d) => d.status === 'abandoned'));
    expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body).toMatchObject({ status: 'disabled', disabledReason: 'failing' });
    const undelivered = (await deliveries(auth, subscription.id)).filter((d: any) => d.status !== 'succeeded');
    expect(undelivered).toHaveLength(3);

    // back up: walk the feed from the last event processed, with the subscription's types
    const caughtUp: any[] = [];
    const filter = `types=${types.join(',')}&limit=2`; // a filtered walk's cursor is followed with the same filter
    let query = `${filter}&afterEvent=${processed[processed.length - 1]}`;
    for (let page = 0; page < 10; page++) {
      const body = (await t.http.get(`/v1/events?${query}`).set('Authorization', auth).expect(200)).body;
      if (!body.data.length) break;
      caughtUp.push(...body.data);
      query = `${filter}&after=${body.nextCursor}`;
    }
    expect(caughtUp.map((e) => [e.type, e.data.id])).toEqual([
      ['checkin.created', during[0].id], ['checkin.created', during[1].id], ['checkin.activated', first.id],
    ]);
    expect(caughtUp.map((e) => e.id).sort()).toEqual(undelivered.map((d: any) => d.eventId).sort());
    // nothing lost: what arrived plus what the walk brought is every event of those types
    const everything = (await t.http.get(`/v1/events?types=${types.join(',')}&limit=100`).set('Authorization', auth).expect(200)).body.data;
    expect([...processed, ...caughtUp.map((e) => e.id)]).toEqual(everything.map((e: any) => e.id));
  });

  it('keeps a subscription active when one delivery fails its whole schedule while another succeeded; lists the failing one as failed with its next attempt meanwhile', async () => {
    const { auth, subscription } = await setup('/mixed', 'checkin.created');
    receiver.answer((req) => (req.path === '/mixed' && JSON.parse(req.body).data.userId === 'auth0|refused' ? { status: 500, body: 'no' } : { status: 200, body: 'ok' }));
    const refused = await checkin(auth, 'auth0|refused');
    await checkin(auth, 'auth0|accepted');
    const eventOf = async (resourceId: string) =>
      (await t.http.get('/v1/events').query({ resourceId }).set('Authorization', auth).expect(200)).body.data[0].id as string;
    const refusedEvent = await eventOf(refused.id);
    const waiting = await deliveriesWhen(auth, subscription.id, (l) => l.some((d) => d.eventId === refusedEvent && d.status === 'failed'));
    expect(waiting.find((d: any) => d.eventId === refusedEvent)).toMatchObject({ status: 'failed', lastResponseStatus: 500, nextAttemptAt: aTimestamp() });
    const done = await deliveriesWhen(auth, subscription.id, (l) => l.some((d) => d.eventId === refusedEvent && d.status === 'abandoned'));
    expect(done.map((d: any) => d.status).sort()).toEqual(['abandoned', 'succeeded']);
    const res = await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200);
    expect(res.body).toMatchObject({ status: 'active', disabledReason: null });
  });

  it('re-enabled, it sends again a delivery made before the last success that went on failing after it (in flight when a later one succeeded)', async () => {
    const { auth, subscription } = await setup('/lagging', 'checkin.created');
    let down = false;
    receiver.answer((req) => {
      if (req.path !== '/lagging') return { status: 200, body: 'ok' };
      return down || JSON.parse(req.body).data.userId === 'auth0|stuck' ? { status: 500, body: 'no' } : { status: 200, body: 'ok' };
    });
    const stuck = await checkin(auth, 'auth0|stuck');
    await checkin(auth, 'auth0|fine'); // succeeds while the first is still being retried
    const given = await deliveriesWhen(auth, subscription.id, (l) => l.length === 2 && l[0].status === 'abandoned' && l[1].status === 'succeeded');
    const after = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
    expect(after).toMatchObject({ status: 'active' }); // a success came after it was made: no disabling for it alone
    expect(Date.parse(given[0].lastAttemptAt)).toBeGreaterThanOrEqual(Date.parse(after.lastSuccessAt));
    down = true; // the outage: the next delivery's whole schedule fails and disables the subscription
    await checkin(auth, 'auth0|outage');
    await deliveriesWhen(auth, subscription.id, (l) => l.length === 3 && l[2].status === 'abandoned');
    expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body).toMatchObject({ status: 'disabled', disabledReason: 'failing' });

    down = false;
    receiver.answer(() => ({ status: 200, body: 'ok' }));
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const sent = await deliveriesWhen(auth, subscription.id, (l) => l.every((d) => d.status === 'succeeded'));
    expect(sent.map((d: any) => [d.id, d.attempts])).toEqual([[given[0].id, 1], [given[1].id, 1], [sent[2].id, 1]]);
    const stuckEvent = (await t.http.get('/v1/events').query({ resourceId: stuck.id }).set('Authorization', auth).expect(200)).body.data[0].id;
    expect(sent[0].eventId).toBe(stuckEvent);
  });

  it('moves a subscription to a new target: every delivery not yet made goes there, and a disabled one stays disabled', async () => {
    const { auth, subscription } = await setup('/old-target', 'checkin.created');
    receiver.answer((req) => (req.path === '/old-target' ? { status: 410 } : { status: 200, body: 'ok' }));
    const first = await checkin(auth, 'auth0|first');
    await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'abandoned');
    const disabled = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
    expect(disabled).toMatchObject({ status: 'disabled', disabledReason: 'gone', disabledAt: aTimestamp() });

    const moved = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ targetUrl: `${receiver.url}/new-target` }).expect(200);
    expect(moved.body).toEqual({ ...disabled, targetUrl: `${receiver.url}/new-target`, updatedAt: aTimestamp() });
    expect((await deliveries(auth, subscription.id))[0]).toMatchObject({ status: 'abandoned' }); // nothing requeued by the move

    // paused from disabled: re-enabled, the given-up delivery is requeued and held
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    const second = await checkin(auth, 'auth0|second');
    const held = await deliveries(auth, subscription.id);
    expect(held.map((d: any) => [d.status, d.attempts, d.nextAttemptAt])).toEqual([['pending', 0, null], ['pending', 0, null]]);
    await sleep(500);
    expect(receiver.received.filter((r) => r.path === '/new-target')).toEqual([]);
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    await deliveriesWhen(auth, subscription.id, (l) => l.length === 2 && l.every((d) => d.status === 'succeeded'));
    // the one given up at the old target and the one held while paused, both at the new one, signed with the same secret
    const arrived = receiver.received.filter((r) => r.path === '/new-target');
    expect(arrived.map((r) => (new Webhook(subscription.secret).verify(r.body, r.headers) as any).data.id).sort()).toEqual([first.id, second.id].sort());
    expect(receiver.received.filter((r) => r.path === '/old-target')).toHaveLength(1);
  });

  it('a new target: deliveries waiting for a retry go there now on a new schedule; an attempt under way to the old one neither disables it nor counts', async () => {
    const { auth, subscription } = await setup('/dying', 'checkin.created');
    // the old receiver fails the first delivery (its retry waits), and answers the second slowly (within the 1 s timeout) with 410
    receiver.answer((req, i) => (req.path === '/dying' ? (i === 0 ? { status: 500, body: 'down' } : { status: 410, delayMs: 700 }) : { status: 200, body: 'ok' }));
    const slowEngine = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV, WEBHOOK_RETRY_SCHEDULE: '0,3600' }), pollIntervalMs: 50 });
    await worker.stop(); // this test's engine retries an hour later
    try {
      const first = await checkin(auth, 'auth0|waiting');
      await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'failed');
      const second = await checkin(auth, 'auth0|under-way');
      await receiver.waitFor(2, { path: '/dying' }); // the second one's attempt has reached the old receiver
      const moved = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ targetUrl: `${receiver.url}/healthy` }).expect(200);
      expect(moved.body.status).toBe('active');
      const done = await deliveriesWhen(auth, subscription.id, (l) => l.length === 2 && l.every((d) => d.status === 'succeeded'));
      expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body).toMatchObject({ status: 'active', disabledReason: null });
      const arrived = receiver.received.filter((r) => r.path === '/healthy').map((r) => JSON.parse(r.body).data.id);
      expect(arrived.sort()).toEqual([first.id, second.id].sort());
      // each attempt names where it went; the new target's starts a new schedule
      const history = async (id: string) => (await t.http.get(`${HOOKS}/${subscription.id}/deliveries/${id}`).set('Authorization', auth).expect(200)).body.attemptHistory
        .map((a: any) => [a.attempt, a.targetUrl.replace(receiver.url, ''), a.responseStatus]);
      const byEvent = Object.fromEntries(await Promise.all(done.map(async (d: any) => [d.eventId, await history(d.id)])));
      expect(Object.values(byEvent).sort()).toEqual([[[1, '/dying', 500], [1, '/healthy', 200]], [[1, '/dying', 410], [1, '/healthy', 200]]].sort());
    } finally {
      await slowEngine.stop();
      worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV }), pollIntervalMs: 50 });
    }
  });

  // Postgres only: there a change and the engine's transaction run at once on the same row. SQLite
  // has one writer at a time, so a change begins after the engine's commit (and a second connection
  // of this one process, holding the lock, would block the change's synchronous BEGIN).
  (t.kind === 'postgres' ? it : it.skip)('a change reads the subscription locked: a disabling committed meanwhile is not undone without its requeue', async () => {
    const { auth, subscription } = await setup('/race', 'checkin.created');
    await whileEngineStopped(async () => { // the transaction below plays the engine
      await checkin(auth, 'auth0|race');
      const [delivery] = await deliveries(auth, subscription.id);
      // the engine's transaction: the delivery given up (410) and the subscription disabled, not committed yet
      const engine = t.db.openAnother();
      try {
        const trx = await engine.knex.transaction();
        await trx('webhook_deliveries').where({ id: delivery.id }).update({ status: 'abandoned', next_attempt_at: null, lease_until: null, lease_token: null });
        await trx('webhook_subscriptions').where({ id: subscription.id }).update({ status: 'disabled', disabled_reason: 'gone', disabled_at: new Date().toISOString() });
        // the pause waits for the row (Postgres) or for the writer (SQLite), then sees the disabling
        const pause = t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).then((r) => r);
        await sleep(300);
        await trx.commit();
        const paused = await pause;
        expect(paused.status).toBe(200);
        expect(paused.body).toMatchObject({ status: 'paused', disabledReason: null, disabledAt: null });
        // leaving disabled requeued the given-up delivery (held while paused)
        expect((await deliveries(auth, subscription.id))[0]).toMatchObject({ id: delivery.id, status: 'pending', attempts: 0 });
      } finally {
        await engine.close();
      }
    });
  });

  // Postgres only, as above. The engine stores an attempt by locking the subscription and then
  // the delivery; a delete that took the deliveries first deadlocked with it (40P01).
  (t.kind === 'postgres' ? it : it.skip)('a delete takes the subscription before its deliveries: it waits for an engine storing an attempt, without a deadlock', async () => {
    const { auth, subscription } = await setup('/delete-race', 'checkin.created');
    await whileEngineStopped(async () => { // the transaction below plays the engine
      await checkin(auth, 'auth0|delete-race');
      const [delivery] = await deliveries(auth, subscription.id);
      await inAnotherTransaction(async (trx) => {
        await trx('webhook_subscriptions').where({ id: subscription.id }).first('id').forUpdate();
        const deletion = t.http.delete(`${HOOKS}/${subscription.id}`).set('Authorization', auth).then((r) => r);
        // until the delete waits for the subscription's row (the server retries a transaction
        // Postgres ends for a deadlock, so only the engine's side shows one)
        await untilBlockedBy(trx, 'the delete never waited for the subscription');
        // the engine's second lock is free: the delete has touched none of the deliveries. Had it
        // taken them first, this would wait for it, and fail after 100 ms instead of deadlocking
        await trx.raw(`set local lock_timeout = '100ms'`);
        await trx('webhook_deliveries').where({ id: delivery.id }).update({ status: 'succeeded', next_attempt_at: null, last_response_status: 200 });
        await trx.commit();
        expect((await deletion).status).toBe(204);
        expect(await t.db.knex('webhook_deliveries').where({ subscription_id: subscription.id }).first()).toBeUndefined();
      });
    });
  });

  // Postgres only, as above: a retry sent again on request takes the subscription before the
  // delivery too (on Postgres one transaction may carry several requests of an organization)
  (t.kind === 'postgres' ? it : it.skip)('a delivery sent again on request waits for an engine holding its subscription, as a delete does', async () => {
    const { auth, subscription } = await setup('/retry-race', 'checkin.created');
    await whileEngineStopped(async () => {
      await checkin(auth, 'auth0|retry-race');
      const [delivery] = await deliveries(auth, subscription.id);
      await inAnotherTransaction(async (trx) => {
        await trx('webhook_subscriptions').where({ id: subscription.id }).first('id').forUpdate();
        const retry = t.http.post(`${HOOKS}/${subscription.id}/deliveries/${delivery.id}/retry`).set('Authorization', auth).then((r) => r);
        await untilBlockedBy(trx, 'the retry never waited for the subscription');
        await trx.raw(`set local lock_timeout = '100ms'`);
        await trx('webhook_deliveries').where({ id: delivery.id }).update({ last_response_status: 500 });
        await trx.commit();
        expect((await retry).status).toBe(202);
      });
    });
  });

  // Postgres only: the retention purge deletes an old delivery before its attempts, as a
  // subscription's deletion does; the other order deadlocked when both reached the same rows
  (t.kind === 'postgres' ? it : it.skip)('the retention purge and a subscription\'s deletion take a delivery and its attempts in one order', async () => {
    const { auth, subscription } = await setup('/purge-race', 'checkin.created');
    await whileEngineStopped(async () => {
      await checkin(auth, 'auth0|purge-race');
      const [delivery] = await deliveries(auth, subscription.id);
      const row = await t.db.knex('webhook_deliveries').where({ id: delivery.id }).first('org_id');
      await t.db.knex('webhook_delivery_attempts').insert({ org_id: row.org_id, subscription_id: subscription.id, delivery_id: delivery.id, attempt: 1, target_url: `${receiver.url}/purge-race`, started_at: new Date().toISOString(), duration_ms: 1, outcome: 'failed', response_status: 500, response_excerpt: null });
      // a subscription's deletion, as deleteSubscription runs it, holding the delivery it deleted
      await inAnotherTransaction(async (deletion) => {
        await deletion('webhook_subscriptions').where({ id: subscription.id }).first('id').forUpdate();
        await deletion('webhook_deliveries').where({ subscription_id: subscription.id }).delete();
        // the purge of every delivery made before a minute from now reaches the same delivery and waits for it
        const purging = t.db.knex.transaction((trx) => deleteDeliveriesBefore(trx, new Date(Date.now() + 60_000).toISOString(), 100));
        await untilBlockedBy(deletion, 'the purge never waited for the deleted delivery');
        // had the purge taken the attempts first, this would wait for it, and fail after 100 ms
        await deletion.raw(`set local lock_timeout = '100ms'`);
        await deletion('webhook_delivery_attempts').where({ subscription_id: subscription.id }).delete();
        await deletion('webhook_subscriptions').where({ id: subscription.id }).delete();
        await deletion.commit();
        await purging;
        expect(await t.db.knex('webhook_delivery_attempts').where({ delivery_id: delivery.id }).first()).toBeUndefined();
      });
    });
  });

  it('re-enabled with a new target in one change: a delivery waiting for a retry from before the last success is due at once too', async () => {
    const { auth, subscription } = await setup('/both-rules', 'checkin.created');
    await whileEngineStopped(async () => { // the rows below stay as written
      await checkin(auth, 'auth0|both-rules');
      const [delivery] = await deliveries(auth, subscription.id);
      const hourLater = new Date(Date.now() + 3_600_000).toISOString();
      await t.db.knex('webhook_deliveries').where({ id: delivery.id }).update({ status: 'failed', attempts: 2, next_attempt_at: hourLater });
      // its last success is newer than the delivery: re-enabling alone would not requeue it
      await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).update({ status: 'disabled', disabled_reason: 'gone', last_success_at: new Date().toISOString() });
      const before = Date.now();
      await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active', targetUrl: `${receiver.url}/both-rules-2` }).expect(200);
      const [after] = await deliveries(auth, subscription.id);
      expect(after).toMatchObject({ status: 'pending', attempts: 0 });
      expect(Date.parse(after.nextAttemptAt)).toBeGreaterThanOrEqual(before - 1000);
      expect(Date.parse(after.nextAttemptAt)).toBeLessThan(Date.parse(hourLater) - 3_000_000);
    });
  });

  it('re-enabling or a new target leaves an attempt under way alone: its lease and its own outcome stand', async () => {
    const { auth, subscription } = await setup('/in-flight', 'checkin.created');
    await whileEngineStopped(async () => { // the rows below play an engine with an attempt under way
      await checkin(auth, 'auth0|in-flight');
      const [delivery] = await deliveries(auth, subscription.id);
      const lease = { lease_until: new Date(Date.now() + 60_000).toISOString(), lease_token: 'an-engines-token', attempts: 1 };
      await t.db.knex('webhook_deliveries').where({ id: delivery.id }).update(lease);
      await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).update({ status: 'disabled', disabled_reason: 'failing' });
      await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
      await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ targetUrl: `${receiver.url}/in-flight-2` }).expect(200);
      expect(await t.db.knex('webhook_deliveries').where({ id: delivery.id }).first('lease_until', 'lease_token', 'attempts')).toEqual(lease);
    });
  });

  it('changes the event types: new events are queued for the new types only, queued ones stay; triggerKey and eventTypes set triggerKey', async () => {
    const { auth, subscription } = await setup('/retyped', 'checkin.created');
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    const queued = await checkin(auth, 'auth0|queued');
    const retyped = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth)
      .send({ eventTypes: ['site.created', 'checkin.activated'], status: 'active' }).expect(200);
    expect(retyped.body).toMatchObject({ triggerKey: null, eventTypes: ['checkin.activated', 'site.created'], status: 'active' });
    const site = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Retyped' }).expect(201)).body;
    await checkin(auth, 'auth0|not-listened');
    await t.http.patch(`/v1/checkins/${queued.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const list = await deliveriesWhen(auth, subscription.id, (l) => l.length === 3 && l.every((d) => d.status === 'succeeded'));
    expect(list.map((d: any) => d.eventType).sort()).toEqual(['checkin.activated', 'checkin.created', 'site.created']);
    const bodies = receiver.received.filter((r) => r.path === '/retyped').map((r) => JSON.parse(r.body));
    expect(bodies.map((b) => [b.type, b.data.id]).sort()).toEqual([['checkin.activated', queued.id], ['checkin.created', queued.id], ['site.created', site.id]].sort());
    // listing by trigger follows the change
    const byTrigger = async (key: string) => (await t.http.get(`${HOOKS}?triggerKey=${key}`).set('Authorization', auth).expect(200)).body.data.map((s: any) => s.id);
    expect(await byTrigger('site.created')).toEqual([subscription.id]);
    expect(await byTrigger('checkin.created')).toEqual([]);

    const single = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ triggerKey: 'site.created' }).expect(200);
    expect(single.body).toMatchObject({ triggerKey: 'site.created', eventTypes: ['site.created'] });
    // the same request again changes nothing, not even updatedAt
    const same = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ triggerKey: 'site.created', status: 'active' }).expect(200);
    expect(same.body).toEqual(single.body);
  });

  it('refuses a change that would make a subscription equal to another (409, nothing changed), and bad changes (400)', async () => {
    const { auth, subscription } = await setup('/first', 'checkin.created');
    const other = (await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/second`, eventTypes: ['checkin.created', 'site.created'] }).expect(201)).body;
    const before = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
    const conflict = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth)
      .send({ targetUrl: `${receiver.url}/second`, eventTypes: ['site.created', 'checkin.created'], status: 'paused' }).expect(409);
    expect(conflict.body).toEqual(anError('ALREADY_EXISTS', { error: `Another subscription of partner webhooks (${other.id}) already sends exactly these event types to this target` }));
    expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body).toEqual(before);
    // its event types are unchanged too: a site event is not queued for it
    await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Not for the first' }).expect(201);
    await deliveriesWhen(auth, other.id, (l) => l.length === 1);
    expect(await deliveries(auth, subscription.id)).toEqual([]);
    // the same target with other types, or other types at the same target, is fine
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ targetUrl: `${receiver.url}/second` }).expect(200);

    const both = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ triggerKey: 'site.created', eventTypes: ['site.created'] }).expect(400);
    expect(both.body.details).toEqual([{ path: '', message: 'must follow the rule: Any of status, targetUrl, and one of triggerKey or eventTypes (not both); fields left out keep their value.' }]);
    for (const body of [{}, { triggerKey: 'site.created', eventTypes: ['site.created'] }, { eventTypes: [] }, { triggerKey: 'site.exploded' }, { secret: 'whsec_x' }, { status: 'disabled' }, { targetUrl: 'not a url' }]) {
      const res = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send(body);
      expect([JSON.stringify(body), res.status, res.body.code]).toEqual([JSON.stringify(body), 400, 'VALIDATION_ERROR']);
    }
    await t.http.patch(`${HOOKS}/whs_nothing`).set('Authorization', auth).send({ status: 'paused' }).expect(404);
  });

  it('holds the deliveries of a paused subscription and sends the backlog on resume', async () => {
    const { auth, subscription } = await setup('/paused', 'checkin.created');
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    const a = await checkin(auth, 'auth0|a');
    const b = await checkin(auth, 'auth0|b');
    await sleep(600);
    expect(receiver.received.filter((r) => r.path === '/paused')).toEqual([]);
    // held: nothing is due while paused
    expect((await deliveries(auth, subscription.id)).map((d: any) => [d.status, d.nextAttemptAt])).toEqual([['pending', null], ['pending', null]]);
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const got = await receiver.waitFor(2, { path: '/paused' });
    expect(got.map((r) => JSON.parse(r.body).data.id).sort()).toEqual([a.id, b.id].sort());
  });

  it('gives up, with the reason, a held delivery whose event the retention purged; the deliveries behind it still go out', async () => {
    const { auth, subscription } = await setup('/purged', 'checkin.created');
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    const old = await checkin(auth, 'auth0|old');
    // what the purge does to an event older than the retention
    await t.db.knex('events').where({ resource_id: old.id }).delete();
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const fresh = await checkin(auth, 'auth0|fresh');
    const [request] = await receiver.waitFor(1, { path: '/purged' });
    expect(JSON.parse(request.body).data.id).toBe(fresh.id);
    const list = await deliveriesWhen(auth, subscription.id, (l) => l.length === 2 && l.every((d) => d.status !== 'pending'));
    expect(list.map((d: any) => [d.status, d.attempts, d.lastResponseExcerpt, d.nextAttemptAt])).toEqual([
      ['abandoned', 0, 'not sent: the event is older than the event retention and was purged', null],
      ['succeeded', 1, 'ok', null],
    ]);
    // the worker polls every 50 ms: the given-up delivery is not claimed again (no new lease, no new write)
    const givenUp = async () => t.db.knex('webhook_deliveries').where({ id: list[0].id }).first('lease_token', 'lease_until', 'updated_at', 'status');
    const before = await givenUp();
    await sleep(300);
    expect(await givenUp()).toEqual(before);
    expect(before).toEqual({ lease_token: null, lease_until: null, updated_at: expect.any(String), status: 'abandoned' });
    expect(receiver.received.filter((r) => r.path === '/purged')).toHaveLength(1);
  });

  it('with private targets allowed, http is taken too, and another scheme is refused saying both', async () => {
    const auth = await t.newKey({ organization: 'org-schemes' });
    const refused = await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: 'ftp://example.com/x', triggerKey: 'site.created' }).expect(400);
    expect(refused.body).toEqual(anError('TARGET_NOT_ALLOWED', { details: [{ path: '/targetUrl', message: 'must be an https or (with WEBHOOK_ALLOW_PRIVATE_TARGETS) http URL' }] }));
    await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/plain-http`, triggerKey: 'site.created' }).expect(201);
  });

  it('redelivers one delivery on request and replays a time window, with the same webhook-ids', async () => {
    const { auth, subscription } = await setup('/replay', ['checkin.created', 'checkin.activated']);
    const from = new Date().toISOString();
    const created = await checkin(auth);
    await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const firstTwo = await receiver.waitFor(2, { path: '/replay' });
    const ids = firstTwo.map((r) => r.headers['webhook-id']);
    // the update is delivered with what changed and what it was before
    const activation = firstTwo.map((r) => JSON.parse(r.body)).find((body) => body.type === 'checkin.activated');
    expect(activation).toMatchObject({ changedFields: ['checkedInAt', 'status'], previousValues: { checkedInAt: null, status: 'pre_checkin' }, data: { status: 'active' } });
    const list = await deliveriesWhen(auth, subscription.id, (l) => l.length === 2 && l.every((d) => d.status === 'succeeded'));

    const retried = await t.http.post(`${HOOKS}/${subscription.id}/deliveries/${list[0].id}/retry`).set('Authorization', auth).expect(202);
    expect(retried.body).toMatchObject({ id: list[0].id, status: 'pending', attempts: 0, nextAttemptAt: aTimestamp() });
    const third = (await receiver.waitFor(3, { path: '/replay' }))[2];
    expect(third.headers['webhook-id']).toBe(list[0].eventId);

    const replay = await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth).send({ from, to: new Date(Date.now() + 1000).toISOString() }).expect(202);
    expect(replay.body).toEqual({ replayed: 2 });
    const all = await receiver.waitFor(5, { path: '/replay' });
    expect(all.slice(3).map((r) => r.headers['webhook-id']).sort()).toEqual([...ids].sort());
    // what became of one event: its first delivery and the replay's, in that order; none of the other event's
    const ofEvent = (eventId: string) => t.http.get(`${HOOKS}/${subscription.id}/deliveries`).query({ eventId }).set('Authorization', auth).expect(200);
    const first = (await ofEvent(list[0].eventId)).body;
    expect(first.data.map((d: { id: string; eventId: string }) => [d.id === list[0].id, d.eventId])).toEqual([[true, list[0].eventId], [false, list[0].eventId]]);
    expect(first.nextCursor).toBeNull();
    expect((await ofEvent('evt_unknown')).body).toEqual({ data: [], nextCursor: null });
    // retried while paused: due, but nothing is sent until the subscription is active, as its answer says
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    const held = await t.http.post(`${HOOKS}/${subscription.id}/deliveries/${list[1].id}/retry`).set('Authorization', auth).expect(202);
    expect(held.body).toMatchObject({ id: list[1].id, status: 'pending', attempts: 0, nextAttemptAt: null });
    await sleep(200);
    expect(receiver.received.filter((r) => r.path === '/replay')).toHaveLength(5);
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    expect((await receiver.waitFor(6, { path: '/replay' }))[5].headers['webhook-id']).toBe(list[1].eventId);
    const empty = await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth).send({ from: '2020-01-01T00:00:00Z', to: '2020-01-02T00:00:00Z' }).expect(202);
    expect(empty.body).toEqual({ replayed: 0 });
    const backwards = await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth).send({ from: '2020-01-02T00:00:00Z', to: '2020-01-01T00:00:00Z' }).expect(400);
    expect(backwards.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/to', message: 'must be after from' }] }));
  });

  it('refuses a replay window of more than 10000 events (400, naming the cap) and queues nothing', async () => {
    const { auth, subscription } = await setup('/cap', 'site.created');
    const { id: orgId } = await t.db.knex('organizations').where({ name: 'org-cap' }).first();
    const now = Date.now();
    const rows = Array.from({ length: 10_001 }, (_, i) => ({
      id: `evt_cap${String(i).padStart(21, '0')}`, org_id: orgId, type: 'site.created', resource_id: null, data: '{}', changed_fields: null,
      occurred_at: new Date(now - 60_000 + i).toISOString(),
    }));
    for (let i = 0; i < rows.length; i += 500) await t.db.knex('events').insert(rows.slice(i, i + 500));
    const window = { from: new Date(now - 120_000).toISOString(), to: new Date(now + 1000).toISOString() };
    const res = await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth).send(window).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/to', message: 'window holds more than 10000 events' }] }));
    expect(await deliveries(auth, subscription.id)).toEqual([]);
    // one event fewer in the window: all of them are queued (paused first: they wait, rather
    // than go to the receiver the other tests share)
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    await t.db.knex('events').where({ id: rows[0].id }).delete();
    expect((await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth).send(window).expect(202)).body).toEqual({ replayed: 10_000 });
    expect(Number((await t.db.knex('webhook_deliveries').where({ subscription_id: subscription.id }).count({ n: '*' }))[0].n)).toBe(10_000);
  }, 60_000);

  it('signs with both secrets for 24 hours after a rotation, then with the new one only', async () => {
    const { auth, subscription } = await setup('/rotate', 'checkin.created');
    const rotated = await t.http.post(`${HOOKS}/${subscription.id}/rotate-secret`).set('Authorization', auth).expect(200);
    expect(rotated.body).toMatchObject({ id: subscription.id, secret: expect.stringMatching(/^whsec_/) });
    expect(rotated.body.secret).not.toBe(subscription.secret);
    await checkin(auth);
    const [request] = await receiver.waitFor(1, { path: '/rotate' });
    expect(request.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(rotated.body.secret).verify(request.body, request.headers)).toMatchObject({ type: 'checkin.created' });
    expect(new Webhook(subscription.secret).verify(request.body, request.headers)).toMatchObject({ type: 'checkin.created' });

    // the old secret signs for 24 hours, then no more
    const row = await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).first();
    expect(Date.parse(row.previous_secret_expires_at) - Date.now()).toBeGreaterThan(24 * 3_600_000 - 60_000);
    expect(Date.parse(row.previous_secret_expires_at) - Date.now()).toBeLessThanOrEqual(24 * 3_600_000);
    await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).update({ previous_secret_expires_at: new Date(Date.now() - 1000).toISOString() });
    await checkin(auth, 'auth0|after-expiry');
    const [, later] = await receiver.waitFor(2, { path: '/rotate' });
    expect(later.headers['webhook-signature'].split(' ')).toHaveLength(1);
    expect(new Webhook(rotated.body.secret).verify(later.body, later.headers)).toMatchObject({ data: { userId: 'auth0|after-expiry' } });
    expect(() => new Webhook(subscription.secret).verify(later.body, later.headers)).toThrow();
  });

  it('deletes a subscription (204, then 404; the same Idempotency-Key replays the 204), with its deliveries and their attempts', async () => {
    const { auth, subscription } = await setup('/delete', 'checkin.created');
    await checkin(auth);
    await deliveriesWhen(auth, subscription.id, (l) => l[0]?.status === 'succeeded');
    const stored = async (table: string) => Number((await t.db.knex(table).where({ subscription_id: subscription.id }).count({ n: '*' }))[0].n);
    expect([await stored('webhook_deliveries'), await stored('webhook_delivery_attempts')]).toEqual([1, 1]);
    // another partner's path does not reach it, as a GET there does not
    const elsewhere = `/v1/integrations/workflow-automation/subscriptions/${subscription.id}`;
    expect((await t.http.delete(elsewhere).set('Authorization', auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
    await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200);
    await t.http.delete(`${HOOKS}/${subscription.id}`).set('Authorization', auth).set('Idempotency-Key', 'del-sub').expect(204);
    const replayed = await t.http.delete(`${HOOKS}/${subscription.id}`).set('Authorization', auth).set('Idempotency-Key', 'del-sub').expect(204);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
    expect((await t.http.delete(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
    await t.http.get(`${HOOKS}/${subscription.id}/deliveries`).set('Authorization', auth).expect(404);
    expect([await stored('webhook_deliveries'), await stored('webhook_delivery_attempts')]).toEqual([0, 0]);
  });

  it('answers trigger samples: the newest events of the type in the delivered shape, else the catalogue sample', async () => {
    const { auth } = await setup('/samples', 'checkin.created');
    const none = await t.http.get('/v1/integrations/workflow-automation/triggers/checkin.created/samples').set('Authorization', auth).expect(200);
    const catalogue = (await t.http.get('/v1/integrations/workflow-automation/triggers?limit=100').set('Authorization', auth).expect(200)).body.data;
    expect(none.body).toEqual({ data: [catalogue.find((tr: any) => tr.key === 'checkin.created').samplePayload] });
    for (const user of ['a', 'b', 'c', 'd']) await checkin(auth, `auth0|${user}`);
    const delivered = await receiver.waitFor(4, { path: '/samples' });
    const samples = await t.http.get('/v1/integrations/workflow-automation/triggers/checkin.created/samples').set('Authorization', auth).expect(200);
    const bySequence = delivered.map((r) => JSON.parse(r.body)).sort((x, y) => y.sequence - x.sequence);
    expect(samples.body).toEqual({ data: bySequence.slice(0, 3) });
    await t.http.get('/v1/integrations/workflow-automation/triggers/checkin.nothing/samples').set('Authorization', auth).expect(404);
  });

  describe('patterns: `*` and `<resource>.*` in eventTypes', () => {
    const typesReceived = (path: string) => receiver.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body).type as string).sort();
    const subscribe = (auth: string, path: string, eventTypes: string[]) => t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: receiver.url + path, eventTypes });

    it('delivers every type a pattern covers and no other; a type a pattern covers is dropped, so equal lists are one subscription', async () => {
      const { auth, subscription } = await setup('/pattern', ['site.created', 'checkin.*', 'checkin.created']);
      const shown = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
      expect(shown.eventTypes).toEqual(['checkin.*', 'site.created']);
      const again = await subscribe(auth, '/pattern', ['checkin.*', 'site.created']).expect(200);
      expect(again.body.id).toBe(subscription.id);

      const created = await checkin(auth);
      await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
      await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ status: 'checked_out' }).expect(200);
      const site = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Pattern site' }).expect(201)).body;
      await t.http.patch(`/v1/sites/${site.id}`).set('Authorization', auth).send({ name: 'Renamed' }).expect(200);
      await deliveriesWhen(auth, subscription.id, (l) => l.length === 4 && l.every((d) => d.status === 'succeeded'));
      // not site.updated, nor the user.updated the check-in recorded
      expect(typesReceived('/pattern')).toEqual(['checkin.activated', 'checkin.checked_out', 'checkin.created', 'site.created']);
    });

    it('`*` takes every type and stands alone; the list filter finds a subscription by a type its pattern covers', async () => {
      const auth = await t.newKey({ organization: 'org-everything' });
      const all = (await subscribe(auth, '/everything', ['log.created', '*', 'site.*']).expect(201)).body;
      expect(all.eventTypes).toEqual(['*']);
      const checkins = (await subscribe(auth, '/checkins-only', ['checkin.*']).expect(201)).body;
      const site = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Everything site' }).expect(201)).body;
      await t.http.post('/v1/logs').set('Authorization', auth).send({ entityType: 'site', entityId: site.id, message: 'hello' }).expect(201);
      await t.http.delete(`/v1/sites/${site.id}`).set('Authorization', auth).expect(204);
      await deliveriesWhen(auth, all.id, (l) => l.length === 3 && l.every((d) => d.status === 'succeeded'));
      expect(typesReceived('/everything')).toEqual(['log.created', 'site.created', 'site.deleted']);
      expect(await deliveries(auth, checkins.id)).toEqual([]);
      const listed = async (type: string) => (await t.http.get(HOOKS).query({ triggerKey: type }).set('Authorization', auth).expect(200)).body.data.map((s: any) => s.id);
      expect(await listed('checkin.checked_out')).toEqual([all.id, checkins.id]);
      expect(await listed('site.deleted')).toEqual([all.id]);
    });

    it('a change of eventTypes to a pattern replaces the types looked up', async () => {
      const { auth, subscription } = await setup('/repattern', 'checkin.created');
      const changed = await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ eventTypes: ['site.*'] }).expect(200);
      expect(changed.body).toMatchObject({ triggerKey: null, eventTypes: ['site.*'] });
      await checkin(auth);
      await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Repattern' }).expect(201);
      await deliveriesWhen(auth, subscription.id, (l) => l.length === 1 && l[0].status === 'succeeded');
      expect(typesReceived('/repattern')).toEqual(['site.created']);
    });

    it('keeps the pattern itself, matched as each event is recorded (a type a later version adds needs no change); replays the types it covers', async () => {
      const { auth, subscription } = await setup('/pattern-kept', ['checkin.*', 'site.created']);
      // the rows recording looks up hold the patterns, not the types of today
      const rows = await t.db.knex('webhook_subscription_types').where({ subscription_id: subscription.id }).orderBy('event_type').pluck('event_type');
      expect(rows).toEqual(['checkin.*', 'site.created']);
      const from = new Date(Date.now() - 1000).toISOString();
      const { id } = await checkin(auth);
      for (const status of ['active', 'checked_out']) await t.http.patch(`/v1/checkins/${id}`).set('Authorization', auth).send({ status }).expect(200);
      await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Kept' }).expect(201);
      await deliveriesWhen(auth, subscription.id, (l) => l.length === 4 && l.every((d) => d.status === 'succeeded'));
      // a replay of the window sends every event of a type the list covers, patterns included
      const replay = await t.http.post(`${HOOKS}/${subscription.id}/replays`).set('Authorization', auth).send({ from, to: new Date(Date.now() + 1000).toISOString() }).expect(202);
      expect(replay.body).toEqual({ replayed: 4 });
      await deliveriesWhen(auth, subscription.id, (l) => l.length === 8 && l.every((d) => d.status === 'succeeded'));
      expect(typesReceived('/pattern-kept')).toEqual(['checkin.activated', 'checkin.activated', 'checkin.checked_out', 'checkin.checked_out', 'checkin.created', 'checkin.created', 'site.created', 'site.created']);
    });

    it('queues one delivery per subscription and event even if its stored list held a type its pattern covers', async () => {
      const { auth, subscription } = await setup('/one-each', ['checkin.*']);
      // no request stores such a list (normalizeSelections); rows edited by hand might
      const { org_id } = await t.db.knex('webhook_subscriptions').where({ id: subscription.id }).first('org_id');
      await t.db.knex('webhook_subscription_types').insert({ subscription_id: subscription.id, org_id, event_type: 'checkin.created' });
      await checkin(auth);
      await deliveriesWhen(auth, subscription.id, (l) => l.length >= 1 && l.every((d) => d.status === 'succeeded'));
      expect(await deliveries(auth, subscription.id)).toHaveLength(1);
    });

    it('refuses a pattern of no resource, and a pattern as triggerKey (400)', async () => {
      const auth = await t.newKey({ organization: 'org-bad-pattern' });
      const res = await subscribe(auth, '/bad-pattern', ['checkins.*']).expect(400);
      // one detail naming every type and pattern, not one per list
      expect(res.body.details).toEqual([{ path: '/eventTypes/0', message: expect.stringMatching(/^must be one of "asset\.created", .*"user\.updated", "\*", "asset\.\*", .*"user\.\*"$/) }]);
      expect(res.body.error).toBe(`/eventTypes/0: ${res.body.details[0].message}`);
      // not a string at all: the same one detail
      const number = await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/bad-pattern`, eventTypes: [5] }).expect(400);
      expect(number.body.details).toEqual(res.body.details);
      await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}/bad-pattern`, triggerKey: 'checkin.*' }).expect(400);
    });
  });

  it('needs integrations:write to subscribe and validates the request', async () => {
    const readOnly = await t.newKey({ scopes: ['integrations:read'] });
    const refused = await t.http.post(HOOKS).set('Authorization', readOnly).send({ targetUrl: `${receiver.url}/x`, triggerKey: 'checkin.created' }).expect(403);
    expect(refused.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="integrations:write"');
    await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: `${receiver.url}/x`, triggerKey: 'checkin.exploded' }).expect(400);
    // neither or both of triggerKey and eventTypes: the rule in words, not the validator's "oneOf"
    const rule = 'must follow the rule: targetUrl and exactly one of triggerKey or eventTypes.';
    for (const body of [{ targetUrl: `${receiver.url}/x` }, { targetUrl: `${receiver.url}/x`, triggerKey: 'checkin.created', eventTypes: ['checkin.created'] }]) {
      const res = await t.http.post(HOOKS).set('Authorization', t.auth).send(body).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { error: `Request body: ${rule}`, details: [{ path: '', message: rule }] }));
    }
    await t.http.post('/v1/integrations/nobody/subscriptions').set('Authorization', t.auth).send({ targetUrl: `${receiver.url}/x`, triggerKey: 'checkin.created' }).expect(404);
    // spellings the sender would call at another URL than written, and a port nothing listens on
    for (const [targetUrl, message] of [
      [`${receiver.url.replace('http://', 'http:///')}/x`, 'must have its host right after the scheme, as in https://host/path'],
      ['http://127.0.0.1:0/x', 'must not use port 0, which no receiver listens on'],
      // with private targets allowed too: a password would be shown back in every answer
      [receiver.url.replace('http://', 'http://user:s3cret@') + '/x', 'must not contain credentials'],
      [receiver.url.replace('http://', 'http://user@') + '/x', 'must not contain credentials'],
    ]) {
      const res = await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl, triggerKey: 'checkin.created' });
      expect([targetUrl, res.status, res.body]).toEqual([targetUrl, 400, anError('TARGET_NOT_ALLOWED', { details: [{ path: '/targetUrl', message }] })]);
    }
  });
}, ENV);

describeEachDatabase('webhook targets (WEBHOOK_ALLOW_PRIVATE_TARGETS off)', (t: TestContext) => {
  const refuse = async (targetUrl: string) => {
    const res = await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl, triggerKey: 'checkin.created' }).expect(400);
    expect(res.body).toEqual(anError('TARGET_NOT_ALLOWED', { details: [{ path: '/targetUrl', message: expect.any(String) }] }));
  };

  it('refuses http, loopback, private, link-local and other non-public targets at subscribe time', async () => {
    await refuse('http://93.184.215.14/hook');
    for (const host of ['127.0.0.1', 'localhost', '10.1.2.3', '192.168.1.10', '172.16.0.1', '169.254.169.254', '[::1]', '[fd00::1]', '[::ffff:127.0.0.1]', '100.64.0.1', '0.0.0.0',
      // IPv6 outside global unicast: IPv4-compatible (deprecated; ::127.0.0.1 is loopback's), and unallocated space
      '[::127.0.0.1]', '[::7f00:1]', '[::10.0.0.1]', '[4000::1]', '[100::1]']) {
      await refuse(`https://${host}/hook`);
    }
    // a public address is accepted, IPv4 or IPv6
    await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: 'https://93.184.215.14/hook', triggerKey: 'checkin.created' }).expect(201);
    await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: 'https://[2606:2800:220:1:248:1893:25c8:1946]/hook', triggerKey: 'checkin.created' }).expect(201);
  });

  it('resolves the target before the write transaction begins: other writes are answered while the lookup waits', async () => {
    // A resolver that answers for one host only when told to (a slow DNS server), for the whole
    // request; every other name resolves as usual.
    const SLOW = 'slow-dns.example';
    let answer!: (addresses: dns.LookupAddress[]) => void;
    const slowAnswer = new Promise<dns.LookupAddress[]>((resolve) => { answer = resolve; });
    const asked: string[] = [];
    const lookup = stubResolver((host) => {
      asked.push(host);
      return host === SLOW ? slowAnswer : undefined;
    });
    try {
      const body = { targetUrl: `https://${SLOW}/hook`, triggerKey: 'log.created' };
      const send = (key?: string) => {
        const req = t.http.post(HOOKS).set('Authorization', t.auth);
        return (key ? req.set('Idempotency-Key', key) : req).send(body).then((res) => res);
      };
      const unkeyed = send();
      const keyed = send('slow-target-1');
      for (let i = 0; i < 200 && asked.filter((h) => h === SLOW).length < 2; i++) await sleep(10);
      expect(asked.filter((h) => h === SLOW)).toHaveLength(2);
      // both subscriptions wait for their lookup; a write meanwhile is answered (on SQLite a lookup
      // inside the transaction would hold the process's write batch, and this write with it)
      const log = await t.http.post('/v1/logs').set('Authorization', t.auth).timeout(5_000)
        .send({ entityType: 'checkin', entityId: 'chk_during_lookup', entryType: 'comment', message: 'written while a lookup waits' });
      expect(log.status).toBe(201);
      answer([{ address: '93.184.215.14', family: 4 }]);
      const [first, second] = [await unkeyed, await keyed];
      expect([first.status, second.status].sort()).toEqual([200, 201]); // the same target and trigger: one subscription
      expect(second.body.id).toBe(first.body.id);
      // a replay answers the stored response without resolving again
      const replay = await send('slow-target-1');
      expect(replay.status).toBe(second.status);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(asked.filter((h) => h === SLOW)).toHaveLength(2);
    } finally {
      answer([{ address: '93.184.215.14', family: 4 }]); // never leave a request waiting on it
      lookup.mockRestore();
    }
  });

  it('a resolver failing for now answers 503 (the key stays free for the retry); a host that does not exist 400', async () => {
    let failing = true;
    const lookup = stubResolver((host) => {
      if (host === 'flaky-dns.example' && failing) return Promise.reject(Object.assign(new Error('getaddrinfo EAI_AGAIN flaky-dns.example'), { code: 'EAI_AGAIN' }));
      if (host === 'flaky-dns.example') return Promise.resolve([{ address: '93.184.215.14', family: 4 }]);
      if (host === 'nowhere.example') return Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.example'), { code: 'ENOTFOUND' }));
      return undefined;
    });
    try {
      const send = (host: string) => t.http.post(HOOKS).set('Authorization', t.auth).set('Idempotency-Key', `resolve-${host}`)
        .send({ targetUrl: `https://${host}/hook`, triggerKey: 'issue.created' });
      const unavailable = await send('flaky-dns.example').expect(503);
      expect(unavailable.body).toEqual(anError('SERVICE_UNAVAILABLE'));
      expect(unavailable.headers['retry-after']).toBe('5');
      failing = false;
      const created = await send('flaky-dns.example').expect(201);
      expect(created.headers['idempotent-replayed']).toBeUndefined();
      const refused = await send('nowhere.example').expect(400);
      expect(refused.body).toEqual(anError('TARGET_NOT_ALLOWED', { details: [{ path: '/targetUrl', message: 'host nowhere.example does not resolve' }] }));
    } finally {
      lookup.mockRestore();
    }
  });

  it('checks a new target as at subscribe time', async () => {
    const sub = (await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: 'https://93.184.215.14/before', triggerKey: 'site.updated' }).expect(201)).body;
    for (const targetUrl of ['http://93.184.215.14/hook', 'https://127.0.0.1/hook', 'https://[fd00::1]/hook', 'https://169.254.169.254/hook']) {
      const res = await t.http.patch(`${HOOKS}/${sub.id}`).set('Authorization', t.auth).send({ targetUrl }).expect(400);
      expect(res.body).toEqual(anError('TARGET_NOT_ALLOWED', { details: [{ path: '/targetUrl', message: expect.any(String) }] }));
    }
    expect((await t.http.get(`${HOOKS}/${sub.id}`).set('Authorization', t.auth).expect(200)).body.targetUrl).toBe('https://93.184.215.14/before');
    const moved = await t.http.patch(`${HOOKS}/${sub.id}`).set('Authorization', t.auth).send({ targetUrl: 'https://93.184.215.14/after' }).expect(200);
    expect(moved.body.targetUrl).toBe('https://93.184.215.14/after');
  });

  it('checks again at connection time: a target that became private is never called', async () => {
    const receiver = await startWebhookReceiver();
    try {
      // subscribed while private targets were allowed; the engine now runs with the rule on
      const permissive = t.anotherApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
      const auth = await t.newKey({ organization: 'rebinding' });
      const sub = await permissive.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url.replace('http://127.0.0.1', 'https://localhost')}/rebind`, triggerKey: 'checkin.created' }).expect(201);
      const worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig({ ...ENV, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' }), pollIntervalMs: 50 });
      try {
        await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|x', siteId: 'site_x' }).expect(201);
        let list: any[] = [];
        for (let i = 0; i < 100 && list[0]?.lastAttemptAt == null; i++) { // until its first outcome is stored
          await sleep(100);
          list = (await t.http.get(`${HOOKS}/${sub.body.id}/deliveries`).set('Authorization', auth).expect(200)).body.data;
        }
        expect(list[0]).toMatchObject({ attempts: expect.any(Number), lastResponseStatus: null, lastResponseExcerpt: expect.stringMatching(/^TARGET_NOT_ALLOWED: localhost resolves to (127\.0\.0\.1|::1)/) });
        expect(receiver.received).toEqual([]);
      } finally {
        await worker.stop();
      }
    } finally {
      await receiver.close();
    }
  });
});
