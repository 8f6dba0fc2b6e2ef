import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Redis } from 'ioredis';
import type { Test } from 'supertest';
import { createApp, App } from '../runtime/http/app';
import { loadConfig } from '../runtime/config';
import { createApiKey, ALL_SCOPES } from '../runtime/auth/apiKeys';
import { testDatabases, TestDatabase } from './support/databases';
import { testClient, TestClient, anError } from './support/testApp';
import { CuttableProxy } from './support/cuttableProxy';
import { startServerProcess } from './support/serverProcess';

/**
 * Redis that stops answering on an open connection (a network partition, a paused Redis: bytes
 * are accepted and never answered), through the TCP proxy between the limiter and Redis
 * (support/cuttableProxy.ts, `freeze()`). A cut connection fails at once; a frozen one only
 * fails when a command's time bound ends (runtime/http/rateLimit.ts), and from then on the
 * per-process memory insurance answers, as for a cut connection (the outage test in
 * test/rateLimit.test.ts). Neither the requests nor the shutdown may wait on the frozen socket.
 */
const redisUrl = process.env.TEST_REDIS_URL;
const sqlite = testDatabases.find((d) => d.name === 'sqlite')!;
if (!redisUrl) console.info('Frozen-Redis rate-limit tests skipped: set TEST_REDIS_URL=redis://127.0.0.1:6379 to run them.');

const LIMITS = {
  LOG_LEVEL: 'info',
  RATE_LIMIT_PER_MINUTE: '5',
  RATE_LIMIT_INGEST_BATCHES_PER_MINUTE: '2',
  RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '3',
};

/** How long one request may take while Redis is frozen: the promise is an answer, not a hang. */
const ANSWER_BOUND_MS = 3000;
const REDIS_UNAVAILABLE = /^Redis unavailable/;

(redisUrl ? describe : describe.skip)('when Redis stops answering on an open connection', () => {
  let db: TestDatabase;
  const proxies: CuttableProxy[] = [];
  const apps: App[] = [];
  const extraDbs: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    db = await sqlite.create();
  });
  afterAll(async () => {
    // every test restores its proxy before it ends, so the apps close on a live connection
    for (const a of apps) await a.close();
    for (const p of proxies) await p.close();
    for (const d of extraDbs) await d.close();
    await db?.destroy();
  });

  async function newProxy(): Promise<CuttableProxy> {
    const target = new URL(redisUrl!);
    const proxy = await CuttableProxy.start(target.hostname, Number(target.port || 6379));
    proxies.push(proxy);
    return proxy;
  }

  /** An app (its own pool and Redis connection, as a server process) counting through `proxy`; `logged` holds its log lines. */
  async function app(proxy: CuttableProxy, prefix: string): Promise<{ http: TestClient; created: App; logged: () => { level: number; msg: string }[] }> {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const other = db.openAnother();
    extraDbs.push(other);
    const config = loadConfig({ ...LIMITS, REDIS_URL: `redis://127.0.0.1:${proxy.port}`, RATE_LIMIT_STORE: 'redis', RATE_LIMIT_KEY_PREFIX: prefix });
    const created = createApp(config, { db: other.knex, logger: pino({ level: 'info' }, sink), purgeIntervalMs: 0 });
    apps.push(created);
    await created.ready();
    return { http: testClient(created.app), created, logged: () => lines.map((l) => JSON.parse(l)) };
  }
  const newKey = async () => (await createApiKey(db.knex, { scopes: ALL_SCOPES }));

  /** The request, answered with `status` within ANSWER_BOUND_MS (supertest gives up on it after that). */
  async function answered(request: Test, status: number) {
    const started = Date.now();
    const res = await request.timeout(ANSWER_BOUND_MS);
    expect(res.status).toBe(status);
    expect(Date.now() - started).toBeLessThan(ANSWER_BOUND_MS);
    return res;
  }

  /** Whether a and b share one budget: 5 requests of a fresh key on a, then one on b (429 when shared). */
  async function shared(a: TestClient, b: TestClient): Promise<boolean> {
    const auth = `Bearer ${(await newKey()).secret}`;
    for (let i = 0; i < 5; i++) await a.get('/v1/sites').set('Authorization', auth).expect(200);
    const res = await b.get('/v1/sites').set('Authorization', auth);
    expect([200, 429]).toContain(res.status);
    return res.status === 429;
  }

  it('requests are answered within 3 s from process memory (200, then 429 past the budget), the fallback is logged once, and counting goes back to Redis once it answers', async () => {
    const proxy = await newProxy();
    const prefix = `frozen-${randomBytes(6).toString('hex')}`;
    const a = await app(proxy, prefix);
    const b = await app(proxy, prefix);
    expect(await shared(a.http, b.http)).toBe(true);

    proxy.freeze();
    try {
      // each process now counts on its own: the whole budget on a, then on b, each answer prompt
      const auth = `Bearer ${(await newKey()).secret}`;
      for (const { http } of [a, b]) {
        for (let i = 1; i <= 5; i++) {
          const res = await answered(http.get('/v1/sites').set('Authorization', auth), 200);
          expect(res.headers.ratelimit).toMatch(new RegExp(`^"per-key";r=${5 - i};t=\\d+$`));
        }
        const refused = await answered(http.get('/v1/sites').set('Authorization', auth), 429);
        expect(refused.body).toEqual(anError('RATE_LIMITED'));
        expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      }
      // a failed authentication is counted in memory too, and answered as promptly
      const failed = await answered(a.http.get('/v1/sites').set('X-Forwarded-For', '192.0.2.9').set('Authorization', 'Bearer fop_wrong'), 401);
      expect(failed.headers['ratelimit-policy']).toBe('"auth-failures";q=3;w=60');
      // the operator is told, once per process (not once per request)
      for (const { logged } of [a, b]) {
        expect(logged().filter((l) => REDIS_UNAVAILABLE.test(l.msg)).map((l) => l.level)).toEqual([40]);
      }
    } finally {
      await proxy.restore();
    }

    // Redis answers again: the processes share one budget again, counted in Redis
    const deadline = Date.now() + 15_000;
    while (!(await shared(a.http, b.http))) {
      if (Date.now() > deadline) throw new Error('Redis never came back into use after the freeze');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const { key, secret } = await newKey();
    await a.http.get('/v1/sites').set('Authorization', `Bearer ${secret}`).expect(200);
    const direct = new Redis(redisUrl!);
    try {
      expect(await direct.get(`${prefix}:per-key:${key.id}`)).toBe('1');
    } finally {
      direct.disconnect();
    }
  }, 30_000);

  it('closing the app while Redis is frozen, with a request waiting on it, resolves within 2 s', async () => {
    const proxy = await newProxy();
    const { http, created } = await app(proxy, `frozen-close-${randomBytes(6).toString('hex')}`);
    const auth = `Bearer ${(await newKey()).secret}`;
    await http.get('/v1/sites').set('Authorization', auth).expect(200); // connected, counting in Redis

    proxy.freeze();
    const waiting = http.get('/v1/sites').set('Authorization', auth).timeout(10_000).then((r) => r.status, (e: Error) => e.message);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const guard = new Promise<'still closing'>((resolve) => setTimeout(() => resolve('still closing'), 5000).unref());
    const outcome = await Promise.race([created.close().then(() => 'closed' as const), guard]);
    const ms = Date.now() - started;
    await proxy.restore(); // lets a close that hung finish, whatever the outcome
    expect(outcome).toBe('closed');
    expect(ms).toBeLessThan(2000);
    expect(await waiting).toBe(200);
  }, 30_000);

  it('SIGTERM while Redis is frozen: the server process exits 0 within a few seconds, not after SHUTDOWN_TIMEOUT_SECONDS with 1', async () => {
    const proxy = await newProxy();
    const { secret } = await newKey();
    const server = await startServerProcess({
      databaseUrl: db.url,
      env: { ...LIMITS, LOG_LEVEL: 'warn', REDIS_URL: `redis://127.0.0.1:${proxy.port}`, RATE_LIMIT_STORE: 'redis', RATE_LIMIT_KEY_PREFIX: `frozen-exit-${randomBytes(6).toString('hex')}`, SHUTDOWN_TIMEOUT_SECONDS: '10' },
    });
    try {
      const res = await fetch(`${server.baseUrl}/v1/sites`, { headers: { Authorization: `Bearer ${secret}` }, signal: AbortSignal.timeout(ANSWER_BOUND_MS) });
      expect(res.status).toBe(200); // connected, counting in Redis
      proxy.freeze();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = Date.now();
      process.kill(server.pid, 'SIGTERM');
      // nothing is in flight: only closing the limiter's connection can hold the process
      const guard = new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 6000).unref());
      const outcome = await Promise.race([server.exited, guard]);
      expect(outcome).toEqual({ code: 0, signal: null });
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await server.stop();
      await proxy.restore();
    }
  }, 40_000);
});
