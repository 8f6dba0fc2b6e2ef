import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import { testDatabases, TestDatabase } from './support/databases';
import { startServerProcess, ServerProcess } from './support/serverProcess';
import { createApiKey, ALL_SCOPES } from '../runtime/auth/apiKeys';

/**
 * Real server processes: SIGTERM drains the requests in flight, and WEB_CONCURRENCY runs
 * several workers on one port with the bootstrap key printed once. Each on SQLite, and on
 * Postgres when TEST_DATABASE_URL is set.
 */
for (const kind of testDatabases) {
  describe(`process lifecycle [${kind.name}]`, () => {
    let db: TestDatabase;
    const servers: ServerProcess[] = [];
    beforeAll(async () => {
      db = await kind.create();
    });
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      await db?.destroy();
    });

    /** A key, and a server process on the suite's database with this shutdown timeout. */
    async function startWithKey(shutdownTimeoutSeconds: number) {
      const { secret } = await createApiKey(db.knex, { scopes: ALL_SCOPES });
      const server = await startServerProcess({ databaseUrl: db.url, env: { SHUTDOWN_TIMEOUT_SECONDS: String(shutdownTimeoutSeconds) } });
      servers.push(server);
      return { secret, server, exited: server.exited };
    }

    it.each(['SIGTERM', 'SIGINT'] as const)('%s: a write still arriving when the signal comes is answered and stored, new connections are refused, exit 0', async (signal) => {
      const { secret, server, exited } = await startWithKey(20);
      const body = JSON.stringify({ name: 'Written during shutdown' });
      const url = new URL('/v1/sites', server.baseUrl);

      // a slow client: the headers and half the body now, the rest after the signal
      const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(url, {
          method: 'POST',
          headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Idempotency-Key': `during-shutdown-${signal}` },
        }, (res) => {
          let text = '';
          res.on('data', (c) => { text += c; });
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on('error', reject);
        req.write(body.slice(0, 10));
        setTimeout(() => {
          process.kill(server.pid, signal);
          // the listener is closed at once: a new connection is refused while the write is still open
          waitUntilRefused(server.baseUrl).then(() => req.end(body.slice(10)), reject);
        }, 300);
      });

      const { status, body: text } = await answer;
      expect(status).toBe(201);
      const created = JSON.parse(text);
      expect(created).toMatchObject({ name: 'Written during shutdown' });
      expect(await exited).toEqual({ code: 0, signal: null });
      const row = await db.knex('sites').where({ id: created.id }).first();
      expect(row).toMatchObject({ name: 'Written during shutdown' });
      expect(server.output()).not.toMatch(/shutdown timeout/);
    });

    it('SIGTERM: a request that comes on a kept-alive connection after the signal is answered with Connection: close, so busy keep-alive clients cannot hold the drain open', async () => {
      // A load balancer's keep-alive pool keeps its connections busy: each answer kept its
      // connection, a new request came on it at once, and the drain ended at the timeout by
      // cutting them (exit 1). Here a request is in flight when the signal comes, and the next one
      // is already queued behind it on the same connection (pipelined: the connection is never
      // idle, so the drain's sweep of idle connections cannot close it in between)
      const { secret, server, exited } = await startWithKey(20);
      const socket = net.connect(Number(new URL(server.baseUrl).port), '127.0.0.1');
      let received = '';
      socket.on('data', (chunk) => { received += chunk; });
      const body = JSON.stringify({ name: 'In flight at the signal' });
      socket.write(`POST /v1/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secret}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`);
      await new Promise((r) => setTimeout(r, 300));
      process.kill(server.pid, 'SIGTERM');
      await waitUntilRefused(server.baseUrl);
      socket.write(`${body.slice(10)}GET /v1/sites?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secret}\r\n\r\n`);
      await new Promise<void>((resolve) => socket.on('close', () => resolve()));
      // each answer's status line and its Connection header (the bodies are JSON: no status line in them)
      const heads = [...received.matchAll(/HTTP\/1\.1 ([^\r]*)\r\n([\s\S]*?)\r\n\r\n/g)];
      expect(heads.map(([, status, fields]) => [`HTTP/1.1 ${status}`, /^connection: (.*)$/im.exec(fields)?.[1]])).toEqual([
        ['HTTP/1.1 201 Created', 'keep-alive'], // it came before the signal
        ['HTTP/1.1 200 OK', 'close'],
      ]);
      expect(await exited).toEqual({ code: 0, signal: null });
    });

    it('SIGTERM with a request that outlasts SHUTDOWN_TIMEOUT_SECONDS: the request is cut, nothing of it is stored, exit 1', async () => {
      const { secret, server, exited } = await startWithKey(1);
      const body = JSON.stringify({ name: 'Never finished' });
      // a client that sends half its body and then nothing: it outlasts the 1 s the server waits
      const cut = new Promise<string>((resolve) => {
        const req = http.request(new URL('/v1/sites', server.baseUrl), {
          method: 'POST',
          headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
        }, (res) => resolve(`answered ${res.statusCode}`));
        req.on('error', (err) => resolve(`cut: ${err.message}`));
        req.write(body.slice(0, 10));
        setTimeout(() => process.kill(server.pid, 'SIGTERM'), 300);
      });
      const startedAt = Date.now();
      expect(await exited).toEqual({ code: 1, signal: null });
      expect(Date.now() - startedAt).toBeLessThan(10_000);
      expect(await cut).toMatch(/^cut: /);
      expect(server.output()).toMatch(/shutdown timeout/);
      expect(await db.knex('sites').where({ name: 'Never finished' }).first()).toBeUndefined();
    });

    it('WEB_CONCURRENCY=2: two workers on one port, the bootstrap key printed once, a killed worker replaced (also all at once), the shared backlog counted once, SIGTERM stops them all with 0', async () => {
      const fresh = await kind.create();
      try {
        // no delivery engine: the deliveries below stay pending for the backlog gauge
        const env = { WEB_CONCURRENCY: '2', LOG_LEVEL: 'info', WEBHOOK_WORKER: 'off', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
        const server = await startServerProcess({ databaseUrl: fresh.url, env });
        servers.push(server);
        const exited = server.exited;
        await waitFor(() => (server.output().match(/"msg":"listening"/g) ?? []).length === 2, 20_000);
        const secrets = server.output().match(/fop_[A-Za-z0-9_-]{43}/g) ?? [];
        expect(new Set(secrets).size).toBe(1); // one key, in the message and its curl line
        expect(server.output().match(/No API key existed/g)).toHaveLength(1);
        expect(Number((await fresh.knex('api_keys').count({ n: '*' }))[0].n)).toBe(1);
        const workers = listeningPids(server);
        expect(workers.size).toBe(2);
        expect(workers.has(server.pid)).toBe(false); // the primary serves nothing itself

        // both workers answer: requests on separate connections spread over them
        const statuses = await Promise.all(Array.from({ length: 20 }, (_, i) =>
          fetch(`${server.baseUrl}/v1/sites`, { method: 'POST', headers: { Authorization: `Bearer ${secrets[0]}`, 'Content-Type': 'application/json', Connection: 'close' }, body: JSON.stringify({ name: `site ${i}` }) }).then((r) => r.status)));
        expect(statuses).toEqual(Array(20).fill(201));
        const metrics = await (await fetch(`${server.baseUrl}/metrics`, { headers: { Connection: 'close' } })).text();
        // the primary sums every worker's counters
        expect(metrics).toMatch(/http_requests_total\{operation="createSite",status="201"\} 20/);
        // a per-process limit is each worker's, not their sum (the workers inherit this process's)
        const openFiles = /^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))![1];
        expect(metrics).toMatch(new RegExp(`^process_max_fds ${openFiles}$`, 'm'));

        // a backlog every process sees is reported once, not once per worker
        const call = (method: string, path: string, body: object) =>
          fetch(`${server.baseUrl}${path}`, { method, headers: { Authorization: `Bearer ${secrets[0]}`, 'Content-Type': 'application/json', Connection: 'close' }, body: JSON.stringify(body) });
        expect((await call('POST', '/v1/integrations/webhooks/subscriptions', { targetUrl: 'http://127.0.0.1:9/unreachable', triggerKey: 'site.created' })).status).toBe(201);
        for (let i = 0; i < 3; i++) expect((await call('POST', '/v1/sites', { name: `queued ${i}` })).status).toBe(201);
        expect(await (await fetch(`${server.baseUrl}/metrics`, { headers: { Connection: 'close' } })).text()).toMatch(/^webhook_deliveries_pending 3$/m);

        // a worker that dies is replaced, and the port keeps answering
        const [victim] = [...workers];
        process.kill(victim, 'SIGKILL');
        await waitFor(() => listeningPids(server).size === 3, 20_000);
        const after = await Promise.all(Array.from({ length: 10 }, (_, i) => call('POST', '/v1/sites', { name: `after ${i}` }).then((r) => r.status)));
        expect(after).toEqual(Array(10).fill(201));
        // the sums never go down (Prometheus would read a reset): the killed worker's counts, as
        // of the last scrape (all 23 sites were made before it), stay in them
        expect(await (await fetch(`${server.baseUrl}/metrics`, { headers: { Connection: 'close' } })).text()).toMatch(/^http_requests_total\{operation="createSite",status="201"\} 33$/m);

        // every worker dying at once: the primary stays and starts two more (it once exited 0 with nothing listening)
        for (const pid of [...listeningPids(server)].filter((p) => p !== victim)) process.kill(pid, 'SIGKILL');
        await waitFor(() => listeningPids(server).size === 5, 20_000);
        expect((await call('POST', '/v1/sites', { name: 'after all died' })).status).toBe(201);

        process.kill(server.pid, 'SIGTERM');
        expect(await exited).toEqual({ code: 0, signal: null });
      } finally {
        await fresh.destroy();
      }
    }, 120_000); // a primary, two workers and three replacements: six processes to start
  });
}

/** The pids of the processes that logged "listening" (a cluster's workers, the replacements included). */
function listeningPids(server: ServerProcess): Set<number> {
  return new Set(server.output().split('\n').flatMap((line) => {
    try {
      const entry = JSON.parse(line);
      return entry.msg === 'listening' ? [entry.pid as number] : [];
    } catch {
      return [];
    }
  }));
}

async function waitUntilRefused(baseUrl: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(500), headers: { Connection: 'close' } });
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the server kept accepting connections after SIGTERM');
}

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
