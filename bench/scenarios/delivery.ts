import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBenchDatabase } from '../lib/database';
import { percentile } from '../lib/load';
import { startServer, ServerProcess } from '../lib/processes';
import { SERVER_ENTRY, SERVER_NODE_OPTIONS } from '../lib/build';
import { API_ENV, call, expectStatus, Measurement, Settings } from './context';
import { MAX_IN_FLIGHT_ALONE } from '../../runtime/webhooks/deliveryClaims';

const WRITERS = 8;

/**
 * delivery: events delivered to a local webhook receiver by the server's own delivery engine.
 * 1. live: check-ins are created by 8 concurrent clients for a while; each delivery's delay is
 *    its arrival at the receiver minus the event's `timestamp` (taken just before the commit,
 *    so slightly more than commit → delivery).
 * 2. backlog: the subscription is paused while events pile up, then resumed; the rate at which
 *    the backlog arrives is the engine's delivery rate, free of the write path.
 */
export async function deliveryScenario(settings: Settings): Promise<Measurement[]> {
  const db = await createBenchDatabase('delivery', settings.postgresUrl);
  const arrivals: { at: number; occurredAt: number; id: string }[] = [];
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      arrivals.push({ at: Date.now(), occurredAt: Date.parse(body.timestamp), id: body.id });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  let api: ServerProcess | undefined;
  try {
    api = await startServer({ name: 'api (delivery)', args: [...SERVER_NODE_OPTIONS, SERVER_ENTRY], env: { ...API_ENV, DATABASE_URL: db.serverUrl, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
    const target = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const hooks = '/v1/integrations/webhooks/subscriptions';
    const sub = await expectStatus(api.url, db.secret, 'POST', hooks, 201, { targetUrl: target, triggerKey: 'checkin.created' });

    const seconds = settings.quick ? 3 : 10;
    settings.log(`  delivery (live): POST /v1/checkins from ${WRITERS} clients for ${seconds} s, each event delivered to a local receiver`);
    const created = await writeFor(api.url, db.secret, seconds);
    await waitForArrivals(arrivals, created.count, 60_000);
    const delays = arrivals.map((a) => a.at - a.occurredAt).sort((a, b) => a - b);
    const live: Measurement = {
      scenario: 'delivery', subject: 'api: live (commit → delivery)',
      requestsPerSec: arrivals.length / created.seconds,
      p50Ms: percentile(delays, 50), p99Ms: percentile(delays, 99),
      note: `events delivered/s while ${WRITERS} clients write (${arrivals.length} events, ${(created.count / created.seconds).toFixed(0)} writes/s); p50/p99 = delay`,
      detail: { events: arrivals.length, writesPerSec: created.count / created.seconds, maxMs: delays[delays.length - 1] },
    };

    const backlog = settings.quick ? 500 : 2000;
    settings.log(`  delivery (backlog): ${backlog} events queued while paused, then resumed`);
    await expectStatus(api.url, db.secret, 'PATCH', `${hooks}/${sub.id}`, 200, { status: 'paused' });
    arrivals.length = 0;
    await writeCount(api.url, db.secret, backlog);
    const resumed = Date.now();
    await expectStatus(api.url, db.secret, 'PATCH', `${hooks}/${sub.id}`, 200, { status: 'active' });
    await waitForArrivals(arrivals, backlog, 120_000);
    const drainSeconds = (Math.max(...arrivals.map((a) => a.at)) - resumed) / 1000;
    const peakRssMb = await api.stop();
    return [
      live,
      { scenario: 'delivery', subject: 'api: backlog drain', requestsPerSec: backlog / drainSeconds, peakRssMb, note: `events delivered/s (${backlog} queued, one receiver: one subscription, at most ${MAX_IN_FLIGHT_ALONE} attempts in flight)`, detail: { backlog, drainSeconds } },
    ];
  } finally {
    await api?.stop();
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
    await db.dispose();
  }
}

async function writeFor(url: string, secret: string, seconds: number): Promise<{ count: number; seconds: number }> {
  const started = Date.now();
  const until = started + seconds * 1000;
  let count = 0;
  await Promise.all(Array.from({ length: WRITERS }, async (_, w) => {
    for (let i = 0; Date.now() < until; i++) {
      const res = await call(url, secret, 'POST', '/v1/checkins', { userId: `bench|${w}-${i}`, siteId: 'site_bench' });
      if (res.status !== 201) throw new Error(`POST /v1/checkins answered ${res.status}`);
      count++;
    }
  }));
  return { count, seconds: (Date.now() - started) / 1000 };
}

async function writeCount(url: string, secret: string, total: number): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: WRITERS }, async () => {
    while (next < total) {
      const i = next++;
      const res = await call(url, secret, 'POST', '/v1/checkins', { userId: `backlog|${i}`, siteId: 'site_bench' });
      if (res.status !== 201) throw new Error(`POST /v1/checkins answered ${res.status}`);
    }
  }));
}

async function waitForArrivals(arrivals: unknown[], count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (arrivals.length < count) {
    if (Date.now() > deadline) throw new Error(`only ${arrivals.length} of ${count} events were delivered within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
