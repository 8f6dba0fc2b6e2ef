import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createApp, App } from '../runtime/http/app';
import { chooseStore } from '../runtime/http/rateLimit';
import { loadConfig } from '../runtime/config';
import { createApiKey, revokeApiKey, ALL_SCOPES } from '../runtime/auth/apiKeys';
import { testDatabases, TestDatabase } from './support/databases';
import { testClient, TestClient, anError } from './support/testApp';
import { takeContractViolations } from './support/contractCheck';
import { CuttableProxy } from './support/cuttableProxy';

/**
 * Rate limits with small budgets, once per store: memory (always), Postgres (TEST_DATABASE_URL)
 * and Redis (TEST_REDIS_URL). Each app gets its own key prefix, so runs sharing one Redis or
 * one database never count each other's requests.
 */
const redisUrl = process.env.TEST_REDIS_URL;
const postgres = testDatabases.find((d) => d.name === 'postgres');
const sqlite = testDatabases.find((d) => d.name === 'sqlite')!;

const LIMITS = {
  LOG_LEVEL: 'silent',
  RATE_LIMIT_PER_MINUTE: '5',
  RATE_LIMIT_INGEST_BATCHES_PER_MINUTE: '2',
  RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '3',
  TRUST_PROXY: 'loopback', // lets a test choose its client address with X-Forwarded-For
};

const stores = [
  { store: 'memory', database: sqlite, env: {} },
  // the config refuses the Postgres store without a Postgres DATABASE_URL; the apps get the test database's pool
  { store: 'postgres', database: postgres, env: { DATABASE_URL: process.env.TEST_DATABASE_URL ?? '' } },
  { store: 'redis', database: sqlite, env: { REDIS_URL: redisUrl } },
] as const;

if (!postgres) console.info('Rate limits on the Postgres store skipped: set TEST_DATABASE_URL to run them.');
if (!redisUrl) console.info('Rate limits on the Redis store skipped: set TEST_REDIS_URL=redis://127.0.0.1:6379 to run them.');

describe('the contract declares the limits on every operation', () => {
  // a guard for operations added later: re-run the command in README "Rate limits" if this fails
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const openapi = require('../generated/openapi.json');
  const resolve = (node: any): any => (node?.$ref ? node.$ref.slice(2).split('/').reduce((n: any, k: string) => n[k], openapi) : node);
  const operations = Object.entries<any>(openapi.paths).filter(([path]) => path.startsWith('/v1/'))
    .flatMap(([path, item]) => Object.entries<any>(item).filter(([m]) => m !== 'parameters').map(([method, op]) => [`${method} ${path}`, op] as const));

  it.each(operations)('%s: 429 and 503, and RateLimit-Policy/RateLimit on every answer but 503', (_name, op) => {
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['429', '503']));
    for (const [status, response] of Object.entries<any>(op.responses)) {
      const headers = Object.keys(resolve(response).headers ?? {});
      if (status === '503') expect(headers).toEqual(expect.arrayContaining(['Retry-After']));
      else expect(headers).toEqual(expect.arrayContaining(['RateLimit-Policy', 'RateLimit']));
    }
    expect(Object.keys(resolve(op.responses['429']).headers)).toEqual(expect.arrayContaining(['Retry-After']));
  });

  it('declares /healthz and /readyz as public', () => {
    expect(openapi.paths['/healthz'].get.security).toEqual([]);
    expect(openapi.paths['/readyz'].get.security).toEqual([]);
    expect(Object.keys(openapi.paths['/readyz'].get.responses)).toEqual(['200', '503']);
  });
});

for (const { store, database, env } of stores) {
  const skip = !database || (store === 'redis' && !redisUrl);
  (skip ? describe.skip : describe)(`rate limits [${store} store]`, () => {
    let db: TestDatabase;
    const apps: App[] = [];
    const extraDbs: { close(): Promise<void> }[] = [];
    let prefix: string;

    /** An app on the test database; `anotherPool` gives it its own connection pool, as a second process has. */
    async function app(options: { prefix?: string; more?: Record<string, string>; anotherPool?: boolean } = {}): Promise<TestClient> {
      const config = loadConfig({ ...LIMITS, ...env, RATE_LIMIT_STORE: store, RATE_LIMIT_KEY_PREFIX: options.prefix ?? prefix, ...options.more });
      let knex = db.knex;
      if (options.anotherPool) {
        const other = db.openAnother();
        extraDbs.push(other);
        knex = other.knex;
      }
      const created = createApp(config, { db: knex, purgeIntervalMs: 0 });
      apps.push(created);
      await created.ready();
      expect(created.rateLimits.store).toBe(store);
      return testClient(created.app);
    }
    const newKey = async () => `Bearer ${(await createApiKey(db.knex, { scopes: ALL_SCOPES })).secret}`;

    beforeAll(async () => {
      db = await database!.create();
    });
    beforeEach(() => {
      prefix = `test-${randomBytes(6).toString('hex')}`;
    });
    afterAll(async () => {
      for (const a of apps) await a.close();
      for (const d of extraDbs) await d.close();
      await db?.destroy();
    });

    it('every /v1 answer carries RateLimit-Policy and RateLimit; over the budget 429 RATE_LIMITED with Retry-After', async () => {
      const http = await app();
      const auth = await newKey();
      for (let i = 1; i <= 5; i++) {
        const res = await http.get('/v1/sites').set('Authorization', auth).expect(200);
        expect(res.headers['ratelimit-policy']).toBe('"per-key";q=5;w=60');
        expect(res.headers.ratelimit).toMatch(new RegExp(`^"per-key";r=${5 - i};t=([1-9]|[1-5][0-9]|60)$`));
      }
      const refused = await http.get('/v1/sites').set('Authorization', auth).expect(429);
      expect(refused.body).toEqual(anError('RATE_LIMITED', { error: expect.stringMatching(/^Rate limit exceeded: 5 requests per minute for this API key; retry after \d+ s$/) }));
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect(refused.headers.ratelimit).toMatch(/^"per-key";r=0;t=\d+$/);
      // another key of the same organization has its own budget
      await http.get('/v1/sites').set('Authorization', await newKey()).expect(200);
    });

    it('a /v1 path or method that matches no operation counts against the caller and carries the fields too', async () => {
      const http = await app();
      const auth = await newKey();
      const unknown = await http.get('/v1/no-such-thing').set('Authorization', auth).expect(404);
      expect(unknown.headers['ratelimit-policy']).toBe('"per-key";q=5;w=60');
      expect(unknown.headers.ratelimit).toMatch(/^"per-key";r=4;t=\d+$/);
      const wrongMethod = await http.put('/v1/sites').set('Authorization', auth).send({}).expect(405);
      expect(wrongMethod.headers.ratelimit).toMatch(/^"per-key";r=3;t=\d+$/);
      // without a valid key it is still 404 (never 401), counted against the address
      const anonymous = await http.get('/v1/no-such-thing').expect(404);
      expect(anonymous.headers['ratelimit-policy']).toMatch(/^"auth-failures";q=\d+;w=60$/);
      // outside /v1 nothing is counted
      const outside = await http.get('/v2/sites').set('Authorization', auth).expect(404);
      expect(outside.headers['ratelimit-policy']).toBeUndefined();
    });

    it('a 429 is never stored as the idempotent answer: the same Idempotency-Key runs once the budget allows', async () => {
      const http = await app();
      const auth = await newKey();
      for (let i = 0; i < 5; i++) await http.get('/v1/sites').set('Authorization', auth).expect(200);
      const body = { name: `Rate-limited site ${prefix}` };
      await http.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', 'limited-once').send(body).expect(429);
      // a fresh budget (another prefix: counters of their own) for the same key and database
      const later = await app({ prefix: `${prefix}-later` });
      const created = await later.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', 'limited-once').send(body).expect(201);
      expect(created.headers['idempotent-replayed']).toBeUndefined();
      const replay = await later.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', 'limited-once').send(body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(created.body);
      const sites = await later.get('/v1/sites').set('Authorization', auth).expect(200);
      expect(sites.body.data.filter((s: { name: string }) => s.name === body.name)).toHaveLength(1);
    });

    it('sensor ingestion has its own smaller budget, counted per batch whatever its size', async () => {
      const http = await app();
      const auth = await newKey();
      const site = await http.post('/v1/sites').set('Authorization', auth).send({ name: 'Telemetry site' }).expect(201);
      const batch = (n: number, minute: number) => ({
        readings: Array.from({ length: n }, (_, i) => ({
          provider: 'p', sensorExternalId: 's', siteId: site.body.id, metric: 'm', value: i, unit: 'C',
          occurredAt: new Date(Date.UTC(2026, 0, 1, 0, minute, i)).toISOString(),
        })),
      });
      const first = await http.post('/v1/sensor-readings').set('Authorization', auth).send(batch(50, 0)).expect(201);
      expect(first.headers['ratelimit-policy']).toBe('"per-key";q=5;w=60, "ingest";q=2;w=60');
      expect(first.headers.ratelimit).toMatch(/^"per-key";r=3;t=\d+, "ingest";r=1;t=\d+$/);
      await http.post('/v1/sensor-readings').set('Authorization', auth).send(batch(1, 1)).expect(201);
      const refused = await http.post('/v1/sensor-readings').set('Authorization', auth).send(batch(1, 2)).expect(429);
      expect(refused.body.error).toMatch(/^Rate limit exceeded: 2 sensor-reading batches per minute for this API key/);
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      // reads still have budget left (5 per key: the site and 3 batches so far)
      const read = await http.get('/v1/sites').set('Authorization', auth).expect(200);
      expect(read.headers.ratelimit).toMatch(/^"per-key";r=0;t=\d+$/);
    });

    it('failed authentication is limited per client address; then even a valid key from that address gets 429', async () => {
      const http = await app();
      const auth = await newKey();
      const from = (address: string) => ({ 'X-Forwarded-For': address });
      for (let i = 1; i <= 3; i++) {
        const res = await http.get('/v1/sites').set(from('203.0.113.7')).set('Authorization', `Bearer fop_wrong${i}`).expect(401);
        expect(res.headers['ratelimit-policy']).toBe('"auth-failures";q=3;w=60');
        expect(res.headers.ratelimit).toMatch(new RegExp(`^"auth-failures";r=${3 - i};t=\\d+$`));
      }
      const blocked = await http.get('/v1/sites').set(from('203.0.113.7')).set('Authorization', auth).expect(429);
      expect(blocked.body.error).toMatch(/^Too many failed authentications from this address/);
      expect(blocked.headers['retry-after']).toMatch(/^\d+$/);
      // another address, and the same key from it, are unaffected
      await http.get('/v1/sites').set(from('198.51.100.20')).set('Authorization', auth).expect(200);
      // IPv6 clients are counted per /64: another address in the same /64 is the same client
      for (let i = 0; i < 3; i++) await http.get('/v1/sites').set(from('2001:db8:1:2::1')).set('Authorization', 'Bearer fop_wrong').expect(401);
      await http.get('/v1/sites').set(from('2001:db8:1:2:ffff::9')).set('Authorization', auth).expect(429);
      await http.get('/v1/sites').set(from('2001:db8:1:3::1')).set('Authorization', auth).expect(200);
    });

    it('a revoked or expired key is answered 401 but not counted against its address: a device left on an old key locks nobody out', async () => {
      const http = await app();
      const revoked = await createApiKey(db.knex, { scopes: ALL_SCOPES });
      await revokeApiKey(db.knex, revoked.key.id);
      const expired = await createApiKey(db.knex, { scopes: ALL_SCOPES, expiresAt: new Date(Date.now() + 300).toISOString() });
      await new Promise((resolve) => setTimeout(resolve, 400));
      const from = { 'X-Forwarded-For': '203.0.113.99' };
      for (let i = 0; i < 5; i++) {
        for (const secret of [revoked.secret, expired.secret]) {
          const res = await http.get('/v1/sites').set(from).set('Authorization', `Bearer ${secret}`).expect(401);
          expect(res.body.error).toMatch(/revoked|expired at/);
          // counted against the key's own budget, not the address's
          expect(res.headers['ratelimit-policy']).toMatch(/^"per-key";q=\d+;w=60$/);
        }
      }
      // ten refusals from the address (its budget is 3): a valid key from it still gets in
      await http.get('/v1/sites').set(from).set('Authorization', await newKey()).expect(200);
      // past its own budget (5), the old key is told to slow down, not answered for ever
      const limitedOld = await http.get('/v1/sites').set(from).set('Authorization', `Bearer ${revoked.secret}`).expect(429);
      expect(limitedOld.headers['retry-after']).toMatch(/^\d+$/);
    });

    if (store !== 'memory') {
      it('two server processes (each its own pool and store connection) share one budget', async () => {
        const a = await app({ anotherPool: true });
        const b = await app({ anotherPool: true });
        const auth = await newKey();
        for (let i = 0; i < 3; i++) await a.get('/v1/sites').set('Authorization', auth).expect(200);
        const fromB = await b.get('/v1/sites').set('Authorization', auth).expect(200);
        expect(fromB.headers.ratelimit).toMatch(/^"per-key";r=1;t=\d+$/);
        await b.get('/v1/sites').set('Authorization', auth).expect(200);
        await a.get('/v1/sites').set('Authorization', auth).expect(429);
        await b.get('/v1/sites').set('Authorization', auth).expect(429);
        if (store === 'postgres') {
          // disposable counters: no WAL for them
          const table = await db.knex.raw(`select relpersistence from pg_class where oid = 'rate_limits'::regclass`);
          expect(table.rows[0].relpersistence).toBe('u');
        }
      });

      if (store === 'postgres') {
        it('the counters table dropped while servers run: counted per process meanwhile, said in the log, and the table comes back', async () => {
          // it once stayed gone until a restart, each process counting alone, without a word
          const lines: string[] = [];
          const config = loadConfig({ ...LIMITS, ...env, RATE_LIMIT_STORE: store, RATE_LIMIT_KEY_PREFIX: prefix });
          const created = createApp(config, { db: db.knex, purgeIntervalMs: 0, logger: pino({ level: 'info' }, new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } })) });
          apps.push(created);
          await created.ready();
          const http = testClient(created.app);
          const auth = await newKey();
          await db.knex.raw('drop table rate_limits');
          await http.get('/v1/sites').set('Authorization', auth).expect(200);
          expect(lines.join('')).toContain('rate-limit table rate_limits did not answer: rate limits are counted per process until it does');
          let back = false;
          for (let i = 0; i < 50 && !back; i++) {
            back = (await db.knex.raw(`select to_regclass('rate_limits') as t`)).rows[0].t !== null;
            if (!back) await new Promise((r) => setTimeout(r, 50));
          }
          expect(back).toBe(true);
          // counted in the table again, where another process sees it
          await http.get('/v1/sites').set('Authorization', auth).expect(200);
          expect(Number((await db.knex('rate_limits').count({ n: '*' }))[0].n)).toBeGreaterThan(0);
        });
      }
    } else {
      it('the memory store counts per process (documented: use Redis or Postgres for several processes)', async () => {
        const a = await app();
        const b = await app();
        const auth = await newKey();
        for (let i = 0; i < 5; i++) await a.get('/v1/sites').set('Authorization', auth).expect(200);
        await a.get('/v1/sites').set('Authorization', auth).expect(429);
        await b.get('/v1/sites').set('Authorization', auth).expect(200);
      });
    }
  });
}

/** One app on a fresh SQLite database for the enclosing describe, with LIMITS and `env`. */
function appOnSqlite(env: Record<string, string>, logger?: pino.Logger): { db: () => TestDatabase; app: () => App } {
  let db: TestDatabase;
  let created: App;
  beforeAll(async () => {
    db = await sqlite.create();
    created = createApp(loadConfig({ ...LIMITS, ...env }), { db: db.knex, logger, purgeIntervalMs: 0 });
    await created.ready();
  });
  afterAll(async () => {
    await created?.close();
    await db?.destroy();
  });
  return { db: () => db, app: () => created };
}

describe('RATE_LIMIT_STORE=off', () => {
  const { db, app } = appOnSqlite({ RATE_LIMIT_STORE: 'off' });

  it('counts nothing: no RateLimit fields and no 429, past every budget', async () => {
    const client = testClient(app().app);
    const auth = `Bearer ${(await createApiKey(db().knex, { scopes: ALL_SCOPES })).secret}`;
    for (let i = 0; i < 8; i++) { // the per-key budget of LIMITS is 5
      const res = await client.get('/v1/sites').set('Authorization', auth).expect(200);
      expect(res.headers['ratelimit-policy']).toBeUndefined();
      expect(res.headers.ratelimit).toBeUndefined();
    }
    for (let i = 0; i < 5; i++) { // and the failed-authentication budget is 3
      const res = await client.get('/v1/sites').set('Authorization', 'Bearer fop_wrong').expect(401);
      expect(res.headers['ratelimit-policy']).toBeUndefined();
    }
    // the contract check holds every answer to sending both fields; the contract's RateLimitPolicy
    // header says they are absent in this mode, and nothing else about these answers differs
    const problems = takeContractViolations();
    expect(problems.length).toBe(2 * 13);
    for (const problem of problems) expect(problem).toMatch(/^GET \/v1\/sites → (200|401): declared header (RateLimit-Policy|RateLimit) is missing$/);
  });
});

describe('a refused request is counted by policy in /metrics and logged as limited:<policy>', () => {
  const lines: string[] = [];
  const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
  const { db, app } = appOnSqlite({ RATE_LIMIT_STORE: 'memory' }, pino({ level: 'info' }, sink));

  it('per-key and auth-failures', async () => {
    const http = testClient(app().app);
    const counted = async (policy: string) => Number(new RegExp(`^rate_limited_requests_total\\{policy="${policy}"\\} (\\d+)$`, 'm').exec((await http.get('/metrics').expect(200)).text)?.[1] ?? 0);
    const before = { perKey: await counted('per-key'), auth: await counted('auth-failures') };
    const auth = `Bearer ${(await createApiKey(db().knex, { scopes: ALL_SCOPES })).secret}`;
    for (let i = 0; i < 5; i++) await http.get('/v1/sites').set('Authorization', auth).expect(200);
    const refused = await http.get('/v1/sites').set('Authorization', auth).expect(429);
    for (let i = 0; i < 3; i++) await http.get('/v1/sites').set('X-Forwarded-For', '192.0.2.77').set('Authorization', 'Bearer fop_wrong').expect(401);
    await http.get('/v1/sites').set('X-Forwarded-For', '192.0.2.77').set('Authorization', 'Bearer fop_wrong').expect(429);
    expect(await counted('per-key')).toBe(before.perKey + 1);
    expect(await counted('auth-failures')).toBe(before.auth + 1);
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request' && l.route === '/v1/sites');
    expect(logged.find((l) => l.requestId === refused.headers['x-request-id'])).toMatchObject({ status: 429, rateLimit: 'limited:per-key' });
    expect(logged.filter((l) => l.status === 429).map((l) => l.rateLimit).sort()).toEqual(['limited:auth-failures', 'limited:per-key']);
  });
});

describe('RATE_LIMIT_STORE=auto', () => {
  it('chooses Redis when REDIS_URL is set, else the Postgres table on Postgres, else process memory', async () => {
    const lite = await sqlite.create();
    try {
      const config = loadConfig({ ...LIMITS }).rateLimit;
      expect(config.store).toBe('auto');
      expect(chooseStore(config, lite.knex, 'redis://127.0.0.1:6379')).toBe('redis');
      expect(chooseStore(config, lite.knex, undefined)).toBe('memory');
      expect(chooseStore({ ...config, store: 'off' }, lite.knex, 'redis://127.0.0.1:6379')).toBe('off');
    } finally {
      await lite.destroy();
    }
    if (!postgres) return; // the Postgres arm needs TEST_DATABASE_URL (said once at the top of this file)
    const pg = await postgres.create();
    try {
      expect(chooseStore(loadConfig({ ...LIMITS }).rateLimit, pg.knex, undefined)).toBe('postgres');
    } finally {
      await pg.destroy();
    }
  });
});

/**
 * When the shared store fails each process counts in its own memory (rate-limiter-flexible's
 * insurance limiter) and the API keeps answering; when the store is back, the processes share
 * one budget again. Two apps, each with its own pool and store connection, as two processes.
 */
const outages = [
  { store: 'redis', database: sqlite, skip: !redisUrl },
  { store: 'postgres', database: postgres, skip: !postgres },
] as const;
for (const { store, database, skip } of outages) {
  (skip ? describe.skip : describe)(`when the ${store} store fails`, () => {
    let db: TestDatabase;
    let proxy: CuttableProxy | undefined;
    const apps: App[] = [];
    const extraDbs: { close(): Promise<void> }[] = [];
    beforeAll(async () => {
      db = await database!.create();
      if (store === 'redis') {
        const target = new URL(redisUrl!);
        proxy = await CuttableProxy.start(target.hostname, Number(target.port || 6379));
      }
    });
    afterAll(async () => {
      for (const a of apps) await a.close();
      for (const d of extraDbs) await d.close();
      await proxy?.close();
      await db?.destroy();
    });
    async function app(prefix: string): Promise<TestClient> {
      const other = db.openAnother();
      extraDbs.push(other);
      const env = store === 'redis' ? { REDIS_URL: `redis://127.0.0.1:${proxy!.port}` } : { DATABASE_URL: process.env.TEST_DATABASE_URL };
      const created = createApp(loadConfig({ ...LIMITS, ...env, RATE_LIMIT_STORE: store, RATE_LIMIT_KEY_PREFIX: prefix }), { db: other.knex, purgeIntervalMs: 0 });
      apps.push(created);
      await created.ready();
      return testClient(created.app);
    }
    const newKey = async () => `Bearer ${(await createApiKey(db.knex, { scopes: ALL_SCOPES })).secret}`;
    /** Whether a and b share one budget: 5 requests of a fresh key on a, then one on b (429 when shared). */
    async function shared(a: TestClient, b: TestClient): Promise<boolean> {
      const auth = await newKey();
      for (let i = 0; i < 5; i++) await a.get('/v1/sites').set('Authorization', auth).expect(200);
      const res = await b.get('/v1/sites').set('Authorization', auth);
      expect([200, 429]).toContain(res.status);
      return res.status === 429;
    }
    // the table broken, not dropped: a dropped one is created again (the test above)
    const fail = async () => (store === 'redis' ? proxy!.cut() : void (await db.knex.raw('alter table rate_limits rename column points to points_away')));
    const restore = async () => (store === 'redis' ? proxy!.restore() : db.knex.raw('alter table rate_limits rename column points_away to points'));

    it('each process counts in memory (never a 5xx), and they share one budget again once it is back', async () => {
      const prefix = `outage-${randomBytes(6).toString('hex')}`;
      const a = await app(prefix);
      const b = await app(prefix);
      expect(await shared(a, b)).toBe(true);

      await fail();
      try {
        // each process now has the whole budget of its own: 5 on a, 5 on b, then 429 on each
        const auth = await newKey();
        for (const http of [a, b]) {
          for (let i = 0; i < 5; i++) await http.get('/v1/sites').set('Authorization', auth).expect(200);
          const refused = await http.get('/v1/sites').set('Authorization', auth).expect(429);
          expect(refused.body).toEqual(anError('RATE_LIMITED'));
        }
      } finally {
        await restore();
      }
      // back: shared again (Redis reconnects on its own within a few seconds)
      const deadline = Date.now() + 15_000;
      while (!(await shared(a, b))) {
        if (Date.now() > deadline) throw new Error(`the ${store} store never came back into use`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }, 30_000);
  });
}
