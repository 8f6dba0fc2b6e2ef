import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import knex from 'knex';
import { Database, openDatabase } from '../runtime/storage/database';
import { migrateLatest, migrateUpTo } from '../runtime/storage/migrate';
import { METRICS_CONTENT_TYPE } from '../runtime/observability/metrics';
import { describeEachDatabase } from './support/testApp';
import { testDatabases, withSearchPath } from './support/databases';
import { startWebhookReceiver, WebhookReceiver } from './support/webhookReceiver';
import { stopChild } from './support/serverProcess';

// `npm run worker` with WORKER_PORT (runtime/webhooks/probeServer.ts): the delivery engine run
// alone answers /healthz, /readyz and /metrics on a port of its own, for an orchestrator's probes
// and Prometheus. The real compiled process, as production runs it (README, "Running in
// production"): dist/ is built first, so these tests never run a stale build.

const ROOT = path.join(__dirname, '..');
const WORKER = path.join('dist', 'runtime', 'webhooks', 'workerMain.js');
const MIGRATIONS = fs.readdirSync(path.join(ROOT, 'runtime', 'storage', 'migrations')).filter((f) => /^\d{4}_.*\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, '')).sort();
const ENV = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
const HOOKS = '/v1/integrations/webhooks/subscriptions';
const READY = { status: 'ok', database: 'ok', migrations: 'current' };
const run = promisify(execFile);

beforeAll(async () => {
  await run(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, timeout: 120_000 });
}, 120_000);

interface Worker {
  port: number;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after 10 s; for the cleanup. */
  stop(): Promise<void>;
}

/** Starts the compiled worker with WORKER_PORT=0 and resolves once its probes listen (the port it logged). */
async function startWorker(databaseUrl: string, env: NodeJS.ProcessEnv = {}): Promise<Worker> {
  const child = spawn(process.execPath, [WORKER], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', HOST: '127.0.0.1', WORKER_PORT: '0', ...env, DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL'); // a worker left running would keep jest from exiting
      reject(new Error(`the worker's probes did not listen within 20 s:\n${output}`));
    }, 20_000);
    const keep = (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split('\n').map((l) => { try { return JSON.parse(l); } catch { return null; } }).find((l) => l?.msg === 'probes listening');
      if (line) {
        clearTimeout(timer);
        resolve(Number(new URL(line.address).port));
      }
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    void exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`the worker exited ${code} before listening:\n${output}`)); });
  });
  return { port, output: () => output, exited, signal: (s) => child.kill(s), stop: () => stopChild(child, exited, 10_000) };
}


/** The worker run to its end (a refused start), with its exit code and both outputs. */
async function runWorker(env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  const result = await run(process.execPath, [WORKER], { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'info', HOST: '127.0.0.1', ...env }, timeout: 20_000 })
    .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), (e) => e);
  return { code: result.code, stdout: String(result.stdout), stderr: String(result.stderr) };
}

async function get(port: number, route: string, headers: Record<string, string> = {}) {
  const res = await fetch(`http://127.0.0.1:${port}${route}`, { headers, signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), retryAfter: res.headers.get('retry-after'), text, json: () => JSON.parse(text) };
}

/** Polls `route` until it answers `status`; the last answer either way. */
async function waitForStatus(port: number, route: string, status: number, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let last = await get(port, route);
  while (last.status !== status && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    last = await get(port, route);
  }
  return last;
}

/** Waits until the worker has printed `text` (a log line of a step it reached); fails after `timeoutMs`. */
async function waitForOutput(worker: Worker, text: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!worker.output().includes(text)) {
    if (Date.now() > deadline) throw new Error(`the worker did not print ${JSON.stringify(text)} within ${timeoutMs} ms:\n${worker.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Whether a new TCP connection to the port is refused (nothing listens). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve(false); });
    socket.once('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNREFUSED' ? resolve(true) : reject(err)));
  });
}

const anErrorBody = (code: string, error: string | RegExp) => ({ code, error: typeof error === 'string' ? error : expect.stringMatching(error), requestId: expect.stringMatching(/^req_[0-9a-f]{20}$/) });

describeEachDatabase('npm run worker with WORKER_PORT', (t) => {
  let receiver: WebhookReceiver;
  let worker: Worker | undefined;
  // one worker for both tests: the second one stops it (each test runs alone as well, with -t)
  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    worker = await startWorker(t.db.url, { ...ENV, METRICS_TOKEN: 'scrape-token' });
  }, 30_000);
  afterAll(async () => {
    await worker?.stop();
    await receiver?.close();
  });

  it('answers /healthz, /readyz, /metrics (the webhook counters, moved by a delivery) and 404 for anything else', async () => {
    const { port } = worker!;
    const health = await get(port, '/healthz');
    expect([health.status, health.type, health.json()]).toEqual([200, 'application/json; charset=utf-8', { status: 'ok' }]);
    // 200 once the engine runs (it starts right after its first look at the schema)
    const ready = await waitForStatus(port, '/readyz', 200, 10_000);
    expect([ready.status, ready.json()]).toEqual([200, READY]);
    expect(worker!.output()).toContain('webhook delivery worker started');

    for (const [method, route] of [['GET', '/v1/sites'], ['GET', '/'], ['POST', '/healthz']]) {
      const res = await fetch(`http://127.0.0.1:${port}${route}`, { method, signal: AbortSignal.timeout(5000) });
      expect([method, route, res.status, res.headers.get('content-type')]).toEqual([method, route, 404, 'application/json; charset=utf-8']);
      expect(await res.json()).toEqual(anErrorBody('NOT_FOUND', `No route ${method} ${route}: this port answers GET /healthz, /readyz and /metrics`));
    }

    // METRICS_TOKEN guards it as on the API server
    const anonymous = await get(port, '/metrics');
    expect([anonymous.status, anonymous.json()]).toEqual([401, anErrorBody('UNAUTHENTICATED', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>')]);
    const scrape = () => get(port, '/metrics', { Authorization: 'Bearer scrape-token' });
    const before = await scrape();
    expect([before.status, before.type]).toEqual([200, METRICS_CONTENT_TYPE]);
    expect(before.text).toContain('# TYPE webhook_delivery_attempts_total counter');
    expect(before.text).toContain('# TYPE webhook_deliveries_given_up_total counter');
    expect(before.text).toMatch(/^db_pool_connections\{state="max"\} \d+$/m);
    expect(before.text).not.toContain('webhook_delivery_attempts_total{outcome="succeeded"}');

    // one delivery, sent by the worker process (the in-process app only writes the event)
    await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: `${receiver.url}/counted`, triggerKey: 'checkin.created' }).expect(201);
    await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: 'auth0|probe', siteId: 's' }).expect(201);
    await receiver.waitFor(1, { path: '/counted' });
    // counted once its outcome is stored, just after the receiver answered
    const deadline = Date.now() + 5000;
    let after = await scrape();
    while (!after.text.includes('webhook_delivery_attempts_total{outcome="succeeded"}') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      after = await scrape();
    }
    expect(after.text).toMatch(/^webhook_delivery_attempts_total\{outcome="succeeded"\} 1$/m);
  }, 60_000);

  it('SIGTERM: /readyz answers 503 while the attempt in flight finishes, then the port closes and it exits 0', async () => {
    const { port } = worker!;
    receiver.answer((req) => (req.path === '/slow' ? { status: 200, body: 'ok', delayMs: 2500 } : { status: 200, body: 'ok' }));
    const sub = (await t.http.post(HOOKS).set('Authorization', t.auth).send({ targetUrl: `${receiver.url}/slow`, triggerKey: 'checkin.created' }).expect(201)).body;
    await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: 'auth0|probe-slow', siteId: 's' }).expect(201);
    await receiver.waitFor(1, { path: '/slow' });
    worker!.signal('SIGTERM');
    const draining = await waitForStatus(port, '/readyz', 503, 2000); // the attempt keeps it up about 2.5 s
    expect([draining.status, draining.json()]).toEqual([503, anErrorBody('SERVICE_UNAVAILABLE', 'The webhook delivery engine is shutting down')]);
    expect(draining.retryAfter).toBe('5'); // as the API server's /readyz
    expect((await get(port, '/healthz')).status).toBe(200); // alive all the same: nothing to restart

    expect(await worker!.exited).toEqual({ code: 0, signal: null });
    expect(await refused(port)).toBe(true);
    // it let the attempt finish and stored its outcome before exiting
    const delivery = (await t.http.get(`${HOOKS}/${sub.id}/deliveries`).set('Authorization', t.auth).expect(200)).body.data[0];
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1, lastResponseStatus: 200 });
    // and said so, as the API server does
    const said = worker!.output().split('\n').map((l) => { try { return JSON.parse(l).msg; } catch { return null; } });
    expect(said).toEqual(expect.arrayContaining(['shutting down: finishing the webhook attempts in flight', 'stopped']));
  }, 30_000);
}, ENV);

/** A fresh database with no migration applied: the per-test-file databases of test/support/databases.ts, before their migrateLatest. */
async function unmigratedDatabase(kind: 'sqlite' | 'postgres'): Promise<Database & { url: string; destroy(): Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-test-'));
    const url = `sqlite://${path.join(dir, 'test.sqlite')}`;
    const db = openDatabase(url);
    return { ...db, url, async destroy() { await db.close(); fs.rmSync(dir, { recursive: true, force: true }); } };
  }
  const postgresUrl = process.env.TEST_DATABASE_URL!;
  const schema = `t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = knex({ client: 'pg', connection: postgresUrl, pool: { min: 0, max: 1 } });
  await admin.raw('create schema ??', [schema]);
  await admin.destroy();
  const db = openDatabase(postgresUrl, { schema });
  return { ...db, url: withSearchPath(postgresUrl, schema), async destroy() { await db.knex.raw('drop schema ?? cascade', [schema]); await db.close(); } };
}

for (const kind of testDatabases.map((k) => k.name)) {
  describe(`npm run worker with WORKER_PORT while a migration is pending [${kind}]`, () => {
    let db: Awaited<ReturnType<typeof unmigratedDatabase>>;
    const workers: Worker[] = [];
    beforeAll(async () => {
      db = await unmigratedDatabase(kind);
      await migrateUpTo(db.knex, MIGRATIONS[MIGRATIONS.length - 2]);
    });
    afterAll(async () => {
      await Promise.all(workers.map((w) => w.stop()));
      await db?.destroy();
    });

    it('/readyz answers 503 naming the migration while the engine waits, and SIGTERM then exits 0', async () => {
      const worker = await startWorker(db.url);
      workers.push(worker);
      expect((await get(worker.port, '/healthz')).status).toBe(200);
      await waitForOutput(worker, 'run npm run migrate, or start the server, first; waiting');
      const waiting = await get(worker.port, '/readyz');
      expect([waiting.status, waiting.json()]).toEqual([503, anErrorBody('SERVICE_UNAVAILABLE', `The database lacks 1 migration(s): ${MIGRATIONS[MIGRATIONS.length - 1]}`)]);
      worker.signal('SIGTERM');
      expect(await worker.exited).toEqual({ code: 0, signal: null });
      expect(await refused(worker.port)).toBe(true);
      expect(worker.output()).not.toContain('webhook delivery worker started');
    }, 30_000);

    it('/readyz answers 503 while waiting, then 200 once the database is migrated and the engine runs', async () => {
      const worker = await startWorker(db.url);
      workers.push(worker);
      await waitForOutput(worker, 'first; waiting');
      expect((await get(worker.port, '/readyz')).status).toBe(503);
      await migrateLatest(db.knex);
      // the engine looks at the schema every 5 s (runtime/webhooks/workerMain.ts)
      const ready = await waitForStatus(worker.port, '/readyz', 200, 12_000);
      expect([ready.status, ready.json()]).toEqual([200, READY]);
      expect(worker.output()).toContain('webhook delivery worker started');
    }, 30_000);
  });
}

describe('npm run worker refusing to start', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-test-'));
  const databaseUrl = `sqlite://${path.join(dir, 'test.sqlite')}`;
  beforeAll(async () => {
    const db = openDatabase(databaseUrl);
    await migrateLatest(db.knex);
    await db.close();
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it.each(['70000', 'abc', '-1'])('WORKER_PORT=%s: one line naming it, and the configuration error code', async (value) => {
    const result = await runWorker({ DATABASE_URL: databaseUrl, WORKER_PORT: value });
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe(`Configuration error: WORKER_PORT="${value}" is invalid: expected a whole number from 0 to 65535`);
    expect(result.stdout).not.toContain('webhook delivery worker started');
  });

  it('a database that does not answer: it stays up, /readyz answers 503 saying so, and SIGTERM exits 0', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port: deadPort } = closed.address() as net.AddressInfo;
    await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
    const worker = await startWorker(`postgres://postgres@127.0.0.1:${deadPort}/nothing`);
    try {
      await waitForOutput(worker, 'the database cannot be reached');
      const waiting = await get(worker.port, '/readyz');
      expect([waiting.status, waiting.retryAfter, waiting.json()]).toEqual([503, '5', anErrorBody('SERVICE_UNAVAILABLE', 'The database is unreachable')]);
      expect((await get(worker.port, '/healthz')).status).toBe(200);
      worker.signal('SIGTERM');
      expect(await worker.exited).toEqual({ code: 0, signal: null });
      expect(worker.output()).not.toContain('webhook delivery worker started');
    } finally {
      await worker.stop();
    }
  }, 30_000);

  it('WORKER_PORT in use: one line and exit 1, as npm start on a port in use, and no engine started', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as net.AddressInfo;
    try {
      const result = await runWorker({ DATABASE_URL: databaseUrl, WORKER_PORT: String(port) });
      expect(result.code).toBe(1);
      expect(result.stderr.trim()).toBe(`Cannot listen on 127.0.0.1:${port}: listen EADDRINUSE: address already in use 127.0.0.1:${port} (set WORKER_PORT or HOST)`);
      expect(result.stdout).not.toContain('webhook delivery worker started');
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});
