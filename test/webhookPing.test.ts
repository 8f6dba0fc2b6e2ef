import { Webhook } from 'standardwebhooks';
import { describeEachDatabase, anError, aTimestamp } from './support/testApp';
import { startWebhookReceiver, WebhookReceiver } from './support/webhookReceiver';
import { MAX_PINGS_PER_ORGANIZATION, MAX_PINGS_UNDER_WAY } from '../runtime/domain/webhookSubscriptions';

// pingIntegrationSubscription: POST /v1/integrations/{partner}/subscriptions/{id}/pings sends one
// signed `webhook.ping` to the target now and answers what the target answered; nothing is
// stored or retried (contract/paths/integrations.yaml, docs/webhooks.md "Testing a receiver").
// No delivery engine runs here: whatever the receiver gets comes from the ping itself.
const ENV = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_TIMEOUT_SECONDS: '1' };
const HOOKS = '/v1/integrations/webhooks/subscriptions';

describeEachDatabase('pingIntegrationSubscription', (t) => {
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    t.onClose(() => receiver.close());
  });

  async function setup(path: string, organization: string) {
    const auth = await t.newKey({ organization });
    const res = await t.http.post(HOOKS).set('Authorization', auth).send({ targetUrl: receiver.url + path, eventTypes: ['site.created', 'issue.created'] }).expect(201);
    return { auth, subscription: res.body as { id: string; secret: string } };
  }
  /** Sends a ping through the suite's app, or through `http` (another app of this process). */
  const ping = (auth: string, id: string, http = t.http) => http.post(`${HOOKS}/${id}/pings`).set('Authorization', auth);

  it('sends a signed webhook.ping the receiver verifies with standardwebhooks, and answers its answer', async () => {
    const { auth, subscription } = await setup('/ping-ok', 'org-ping-ok');
    receiver.answer((request) => (request.path === '/ping-ok' ? { status: 204 } : { status: 200 }));
    const res = await ping(auth, subscription.id).expect(200);
    const [request] = await receiver.waitFor(1, { path: '/ping-ok', timeoutMs: 1000 });
    const message = new Webhook(subscription.secret).verify(request.body, request.headers) as any;
    expect(message).toEqual({
      id: expect.stringMatching(/^ping_[0-9a-z]{24}$/), type: 'webhook.ping', timestamp: aTimestamp(),
      data: { subscriptionId: subscription.id, partner: 'webhooks', eventTypes: ['issue.created', 'site.created'] },
    });
    expect(request.headers['webhook-id']).toBe(message.id);
    expect(res.body).toEqual({
      id: message.id, targetUrl: `${receiver.url}/ping-ok`, sentAt: message.timestamp, durationMs: expect.any(Number),
      succeeded: true, responseStatus: 204, responseExcerpt: '',
    });

    // not an event, not a delivery, not the subscription's success
    const deliveries = (await t.http.get(`${HOOKS}/${subscription.id}/deliveries`).set('Authorization', auth).expect(200)).body.data;
    expect(deliveries).toEqual([]);
    expect((await t.http.get('/v1/events').set('Authorization', auth).expect(200)).body.data).toEqual([]);
    const after = (await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body;
    expect(after).toMatchObject({ status: 'active', lastSuccessAt: null });
  });

  it('answers the target\'s failure as succeeded: false, and a 410 neither disables the subscription nor is retried', async () => {
    const { auth, subscription } = await setup('/ping-failing', 'org-ping-failing');
    receiver.answer((request) => (request.path === '/ping-failing' ? { status: 410, body: 'gone\u0000for good' } : { status: 200 }));
    const res = await ping(auth, subscription.id).expect(200);
    expect(res.body).toMatchObject({ succeeded: false, responseStatus: 410, responseExcerpt: 'gone\uFFFDfor good' });
    expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body).toMatchObject({ status: 'active', disabledReason: null });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.received.filter((r) => r.path === '/ping-failing')).toHaveLength(1);
  });

  it('waits for the target at most WEBHOOK_TIMEOUT_SECONDS, and tells a receiver that never answers', async () => {
    const { auth, subscription } = await setup('/ping-hang', 'org-ping-hang');
    receiver.answer((request) => (request.path === '/ping-hang' ? { status: 200, hang: true } : { status: 200 }));
    const res = await ping(auth, subscription.id).expect(200);
    expect(res.body).toMatchObject({ succeeded: false, responseStatus: null, responseExcerpt: 'timed out after 1 s' });
    expect(res.body.durationMs).toBeGreaterThanOrEqual(900);
  });

  // The pings kept under way are sent through a second app of this process (the bounds are the
  // process's) that waits 10 s for a target, and answered after SLOW_MS: the checks between fit in.
  const SLOW_MS = 4000;

  it(`waits on at most ${MAX_PINGS_PER_ORGANIZATION} targets of one organization at once per process: another of its pings answers 429, another organization's is sent`, async () => {
    const { auth, subscription } = await setup('/ping-crowd', 'org-ping-crowd');
    const other = await setup('/ping-neighbour', 'org-ping-neighbour');
    const patient = t.anotherApp({ WEBHOOK_TIMEOUT_SECONDS: '10' });
    receiver.answer((request) => (request.path === '/ping-crowd' ? { status: 200, delayMs: SLOW_MS } : { status: 204 }));
    const crowd = Array.from({ length: MAX_PINGS_PER_ORGANIZATION }, () => ping(auth, subscription.id, patient.http).then((r) => r));
    await receiver.waitFor(MAX_PINGS_PER_ORGANIZATION, { path: '/ping-crowd', timeoutMs: 5000 });
    const refused = await ping(auth, subscription.id).set('Idempotency-Key', 'over-the-share').expect(429);
    expect(refused.body).toEqual(anError('RATE_LIMITED'));
    expect(refused.headers['retry-after']).toBe('1');
    // a bound on waits, not a budget: the key's budgets are shown as they stand, none exhausted
    expect(refused.headers.ratelimit).toMatch(/^"[a-z-]+";r=[1-9]\d*;t=\d+(, "[a-z-]+";r=[1-9]\d*;t=\d+)*$/);
    // the slow receiver of one organization does not keep another's ping out
    expect((await ping(other.auth, other.subscription.id).expect(200)).body).toMatchObject({ succeeded: true, responseStatus: 204 });
    expect((await Promise.all(crowd)).map((a) => [a.status, a.body.succeeded])).toEqual(Array(MAX_PINGS_PER_ORGANIZATION).fill([200, true]));
    receiver.answer(() => ({ status: 204 }));
    // the refusal was not stored under its key: the same request sent again is sent
    const again = await ping(auth, subscription.id).set('Idempotency-Key', 'over-the-share').expect(200);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body).toMatchObject({ succeeded: true });
  });

  it(`waits on at most ${MAX_PINGS_UNDER_WAY} targets at once per process: another ping meanwhile answers 503 with Retry-After, and works once they are done`, async () => {
    const busy = await Promise.all(Array.from({ length: MAX_PINGS_UNDER_WAY / MAX_PINGS_PER_ORGANIZATION }, (_, i) => setup('/ping-full', `org-ping-full-${i}`)));
    const late = await setup('/ping-late', 'org-ping-late');
    const patient = t.anotherApp({ WEBHOOK_TIMEOUT_SECONDS: '10' });
    receiver.answer((request) => (request.path === '/ping-full' ? { status: 200, delayMs: SLOW_MS } : { status: 204 }));
    const under = busy.flatMap(({ auth, subscription }) =>
      Array.from({ length: MAX_PINGS_PER_ORGANIZATION }, () => ping(auth, subscription.id, patient.http).then((r) => r)));
    await receiver.waitFor(MAX_PINGS_UNDER_WAY, { path: '/ping-full', timeoutMs: 5000 });
    const refused = await ping(late.auth, late.subscription.id).expect(503);
    expect(refused.body).toEqual(anError('SERVICE_UNAVAILABLE'));
    expect(refused.headers['retry-after']).toBe('1');
    expect((await Promise.all(under)).map((a) => [a.status, a.body.succeeded])).toEqual(Array(MAX_PINGS_UNDER_WAY).fill([200, true]));
    expect((await ping(late.auth, late.subscription.id).expect(200)).body).toMatchObject({ succeeded: true });
  });

  it('pings a paused subscription (a receiver is checked before resuming), and signs with both secrets during a rotation', async () => {
    const { auth, subscription } = await setup('/ping-paused', 'org-ping-paused');
    receiver.answer(() => ({ status: 200 }));
    await t.http.patch(`${HOOKS}/${subscription.id}`).set('Authorization', auth).send({ status: 'paused' }).expect(200);
    const rotated = (await t.http.post(`${HOOKS}/${subscription.id}/rotate-secret`).set('Authorization', auth).expect(200)).body;
    expect((await ping(auth, subscription.id).expect(200)).body).toMatchObject({ succeeded: true, responseStatus: 200 });
    const [request] = await receiver.waitFor(1, { path: '/ping-paused', timeoutMs: 1000 });
    expect(request.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(rotated.secret).verify(request.body, request.headers)).toMatchObject({ type: 'webhook.ping' });
    expect(new Webhook(subscription.secret).verify(request.body, request.headers)).toMatchObject({ type: 'webhook.ping' });
    expect((await t.http.get(`${HOOKS}/${subscription.id}`).set('Authorization', auth).expect(200)).body.status).toBe('paused');
  });

  it('checks the target at connection time: a private address is not sent to where the setting does not allow it', async () => {
    const { auth, subscription } = await setup('/ping-private', 'org-ping-private');
    const strict = t.anotherApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    const res = await strict.http.post(`${HOOKS}/${subscription.id}/pings`).set('Authorization', auth).expect(200);
    expect(res.body).toMatchObject({ succeeded: false, responseStatus: null, responseExcerpt: expect.stringMatching(/^TARGET_NOT_ALLOWED: /) });
    expect(receiver.received.filter((r) => r.path === '/ping-private')).toHaveLength(0);
  });

  it('replays its answer under the same Idempotency-Key without sending again', async () => {
    const { auth, subscription } = await setup('/ping-keyed', 'org-ping-keyed');
    receiver.answer(() => ({ status: 200, body: 'ok' }));
    const first = await ping(auth, subscription.id).set('Idempotency-Key', 'ping-once').expect(200);
    const again = await ping(auth, subscription.id).set('Idempotency-Key', 'ping-once').expect(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(receiver.received.filter((r) => r.path === '/ping-keyed')).toHaveLength(1);
  });

  it('answers 404 for an unknown subscription, another organization\'s, or an unknown partner, and 403 without integrations:write', async () => {
    const { subscription } = await setup('/ping-refused', 'org-ping-owner');
    const other = await t.newKey({ organization: 'org-ping-other' });
    expect((await ping(other, subscription.id).expect(404)).body).toEqual(anError('NOT_FOUND'));
    expect((await ping(other, 'whs_00000000000000000000000000').expect(404)).body).toEqual(anError('NOT_FOUND'));
    expect((await t.http.post(`/v1/integrations/nobody/subscriptions/${subscription.id}/pings`).set('Authorization', other).expect(404)).body).toEqual(anError('NOT_FOUND'));
    const reader = await t.newKey({ organization: 'org-ping-owner', scopes: ['integrations:read'] });
    expect((await ping(reader, subscription.id).expect(403)).body).toEqual(anError('INSUFFICIENT_SCOPE'));
    expect(receiver.received.filter((r) => r.path === '/ping-refused')).toHaveLength(0);
  });
}, ENV);
