import { describeEachDatabase } from './support/testApp';
import { startWebhookReceiver, WebhookReceiver } from './support/webhookReceiver';
import { startDeliveryWorker, DeliveryWorker } from '../runtime/webhooks/deliveryWorker';
import { MAX_IN_FLIGHT_ALONE, MAX_IN_FLIGHT_PER_SUBSCRIPTION } from '../runtime/webhooks/deliveryClaims';
import { loadConfig } from '../runtime/config';

// One slow receiver must not hold up the others: a subscription has at most
// MAX_IN_FLIGHT_PER_SUBSCRIPTION attempts under way while others have deliveries, and
// MAX_IN_FLIGHT_ALONE when it is the only one (runtime/webhooks/deliveryClaims.ts), so some of an
// engine's attempts (32) always stay free for the other subscriptions. The slow backlogs are
// larger than the engine's attempts, which without those bounds they would all take. Before, deliveries were
// claimed oldest first whatever their subscription, and a receiver that hung until the timeout
// held every attempt of the engine for as long as its backlog lasted.
const HOOKS = '/v1/integrations/webhooks/subscriptions';
const TIMEOUT_SECONDS = 6;
const ENV = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS), WEBHOOK_LEASE_SECONDS: '30' };

describeEachDatabase('delivery: one slow receiver does not hold up the others', (t) => {
  let receiver: WebhookReceiver;
  let worker: DeliveryWorker | undefined;
  const subscriptions: { auth: string; id: string }[] = [];

  beforeEach(async () => {
    receiver = await startWebhookReceiver();
    // the slow ones never answer: each of their attempts waits out the whole timeout
    receiver.answer((request) => (request.path.startsWith('/slow') ? { status: 200, hang: true } : { status: 204 }));
  });
  afterEach(async () => {
    await receiver.close(); // ends the hung attempts, so that the engine stops at once
    await worker?.stop();
    worker = undefined;
    // nothing of this test is left due for the next one
    for (const s of subscriptions.splice(0)) await t.http.delete(`${HOOKS}/${s.id}`).set('Authorization', s.auth).expect(204);
  });

  /** A subscription of a new organization to site.created at `path`, with `backlog` sites made for it. */
  async function subscriber(name: string, path: string, backlog: number): Promise<string> {
    const auth = await t.newKey({ organization: `fair-${name}` });
    const created = await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: `${receiver.url}${path}`, triggerKey: 'site.created' }).expect(201);
    subscriptions.push({ auth, id: created.body.id });
    for (let i = 0; i < backlog; i++) await t.http.post('/v1/sites').set('Authorization', auth).send({ name: `Backlog ${i}` }).expect(201);
    return auth;
  }
  const attempts = (path: string) => receiver.received.filter((r) => r.path === path).length;

  /** Starts the engine, waits until the slow paths hang with `hung` attempts each, then times a fresh delivery of `fastAuth`'s. */
  async function freshDeliveryWhileHung(fastAuth: string, hung: Record<string, number>): Promise<number> {
    worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig(ENV), pollIntervalMs: 50 });
    for (const [path, count] of Object.entries(hung)) await receiver.waitFor(count, { path, timeoutMs: 5000 });
    const startedAt = Date.now();
    await t.http.post('/v1/sites').set('Authorization', fastAuth).send({ name: 'Fresh' }).expect(201);
    const [fast] = await receiver.waitFor(1, { path: '/fast', timeoutMs: (TIMEOUT_SECONDS - 1) * 1000 });
    return fast.at - startedAt;
  }

  it(`a receiver that hangs, alone, holds at most ${MAX_IN_FLIGHT_ALONE} of the engine's attempts; another organization's delivery goes out at once`, async () => {
    await subscriber('slow', '/slow', 40);
    const fastAuth = await subscriber('fast', '/fast', 0);
    // delivered while every hung attempt was still hanging (none has timed out yet)
    expect(await freshDeliveryWhileHung(fastAuth, { '/slow': MAX_IN_FLIGHT_ALONE })).toBeLessThan((TIMEOUT_SECONDS / 2) * 1000);
    expect(attempts('/slow')).toBe(MAX_IN_FLIGHT_ALONE);
  }, 30_000);

  it(`two receivers that hang hold at most ${MAX_IN_FLIGHT_PER_SUBSCRIPTION} attempts each; a third organization's delivery goes out at once`, async () => {
    await subscriber('slow-a', '/slow-a', 40);
    await subscriber('slow-b', '/slow-b', 40);
    const fastAuth = await subscriber('fast-2', '/fast', 0);
    const hung = { '/slow-a': MAX_IN_FLIGHT_PER_SUBSCRIPTION, '/slow-b': MAX_IN_FLIGHT_PER_SUBSCRIPTION };
    expect(await freshDeliveryWhileHung(fastAuth, hung)).toBeLessThan((TIMEOUT_SECONDS / 2) * 1000);
    expect([attempts('/slow-a'), attempts('/slow-b')]).toEqual([MAX_IN_FLIGHT_PER_SUBSCRIPTION, MAX_IN_FLIGHT_PER_SUBSCRIPTION]);
  }, 30_000);
}, ENV);
