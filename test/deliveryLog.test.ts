import { Writable } from 'node:stream';
import pino from 'pino';
import { describeEachDatabase } from './support/testApp';
import { startWebhookReceiver } from './support/webhookReceiver';
import { startDeliveryWorker } from '../runtime/webhooks/deliveryWorker';
import { loadConfig } from '../runtime/config';

// The delivery engine logs each attempt that did not succeed, with what the receiver answered
// (runtime/webhooks/deliveryWorker.ts), so that an operator can follow a failing endpoint in the
// logs as in the metrics; a success is the rule and is logged at debug only.
const ENV = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_SCHEDULE: '0,1', WEBHOOK_TIMEOUT_SECONDS: '2' };

describeEachDatabase('the delivery engine\'s log', (t) => {
  it('one info line per failed attempt (delivery, subscription, event, attempt, status, excerpt), a success at debug', async () => {
    const receiver = await startWebhookReceiver();
    receiver.answer((_request, index) => (index === 0 ? { status: 500, body: 'database is down' } : { status: 204 }));
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } });
    const worker = startDeliveryWorker({ db: t.db.knex, settings: loadConfig(ENV), logger: pino({ level: 'debug' }, sink), pollIntervalMs: 50 });
    try {
      const auth = await t.newKey({ organization: 'delivery-log' });
      const subscription = (await t.http.post('/v1/integrations/webhooks/subscriptions').set('Authorization', auth).send({ targetUrl: `${receiver.url}/logged`, triggerKey: 'site.created' }).expect(201)).body;
      await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Logged' }).expect(201);
      await receiver.waitFor(2, { path: '/logged', timeoutMs: 10_000 });
      for (let i = 0; i < 100 && !lines.some((l) => l.msg === 'webhook attempt succeeded'); i++) await new Promise((resolve) => setTimeout(resolve, 50));
      const attempts = lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('webhook attempt'));
      expect(attempts).toEqual([
        expect.objectContaining({ level: 30, msg: 'webhook attempt failed', subscriptionId: subscription.id, deliveryId: expect.stringMatching(/^whd_/), eventId: expect.stringMatching(/^evt_/), attempt: 1, status: 500, outcome: 'failed', excerpt: 'database is down' }),
        expect.objectContaining({ level: 20, msg: 'webhook attempt succeeded', subscriptionId: subscription.id, attempt: 2, status: 204, outcome: 'succeeded' }),
      ]);
      // never the secret, nor the body sent
      expect(JSON.stringify(lines)).not.toContain(subscription.secret);
    } finally {
      await worker.stop();
      await receiver.close();
    }
  });
}, ENV);
