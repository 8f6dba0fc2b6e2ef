import { spawn, execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig, ConfigError } from '../runtime/config';

const ROOT = path.join(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

describe('configuration', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({})).toEqual({
      production: false, port: 8080, host: '127.0.0.1', databaseUrl: 'sqlite:data/fieldops.sqlite', idempotencyTtlSeconds: 86400,
      idempotencyLeaseSeconds: 8, logLevel: 'info', maxBodyBytes: 1048576, corsOrigins: [],
      eventsRetentionDays: 30, webhookWorker: true, webhookTimeoutSeconds: 10, webhookAllowPrivateTargets: false, webhookLeaseSeconds: 60,
      webhookRetrySchedule: [0, 5, 300, 1800, 7200, 18000, 36000, 36000, 36000, 36000, 36000, 36000],
      rateLimit: { perMinute: 600, ingestBatchesPerMinute: 60, authFailuresPerMinute: 30, store: 'auto', keyPrefix: 'fop' },
      redisUrl: undefined, trustProxy: false, shutdownTimeoutSeconds: 25, requestTimeoutSeconds: 30, databaseQueryTimeoutSeconds: 15, webConcurrency: 1, metricsToken: undefined, workerPort: undefined,
    });
  });

  it.each([
    ['PORT', 'abc', 'PORT="abc" is invalid: expected a whole number from 0 to 65535'],
    ['PORT', '70000', 'PORT="70000" is invalid: expected a whole number from 0 to 65535'],
    ['IDEMPOTENCY_TTL_SECONDS', '-5', 'IDEMPOTENCY_TTL_SECONDS="-5" is invalid'],
    // a lease within SQLite's busy timeout could be taken over from a request still running
    ['IDEMPOTENCY_LEASE_SECONDS', '3', 'IDEMPOTENCY_LEASE_SECONDS="3" is invalid: expected a whole number from 7 to 3600'],
    ['MAX_BODY_BYTES', '1MB', 'MAX_BODY_BYTES="1MB" is invalid'],
    ['LOG_LEVEL', 'loud', 'LOG_LEVEL="loud" is invalid: expected one of fatal, error, warn, info, debug, trace, silent'],
    ['DATABASE_URL', 'mysql://x', 'DATABASE_URL="mysql://x" is invalid: expected sqlite:'],
    ['CORS_ORIGINS', 'not an origin', 'CORS_ORIGINS contains "not an origin"'],
    ['EVENTS_RETENTION_DAYS', '0', 'EVENTS_RETENTION_DAYS="0" is invalid: expected a whole number from 1 to 3650'],
    ['WEBHOOK_WORKER', 'maybe', 'WEBHOOK_WORKER="maybe" is invalid: expected one of on, off'],
    ['WEBHOOK_TIMEOUT_SECONDS', '0', 'WEBHOOK_TIMEOUT_SECONDS="0" is invalid'],
    ['WEBHOOK_RETRY_SCHEDULE', '0,5,soon', 'WEBHOOK_RETRY_SCHEDULE="0,5,soon" is invalid: expected 1 to 50 comma-separated delays in seconds'],
    ['WEBHOOK_RETRY_SCHEDULE', '5,10', 'start the list with 0'],
    ['WEBHOOK_ALLOW_PRIVATE_TARGETS', 'yes', 'WEBHOOK_ALLOW_PRIVATE_TARGETS="yes" is invalid: expected one of true, false'],
    ['WEBHOOK_LEASE_SECONDS', '5', 'WEBHOOK_LEASE_SECONDS=5 is invalid: it must be longer than WEBHOOK_TIMEOUT_SECONDS (10)'],
    ['RATE_LIMIT_PER_MINUTE', '0', 'RATE_LIMIT_PER_MINUTE="0" is invalid: expected a whole number from 1 to 10000000'],
    ['RATE_LIMIT_STORE', 'disk', 'RATE_LIMIT_STORE="disk" is invalid: expected one of auto, memory, redis, postgres, off'],
    ['REDIS_URL', 'localhost:6379', 'REDIS_URL="localhost:6379" is invalid: expected redis://host:6379'],
    ['TRUST_PROXY', 'everyone', 'TRUST_PROXY contains "everyone"'],
    // shaped like addresses, but not ones express can compile: it once stopped the server only after the migrations
    ['TRUST_PROXY', '999.1.1.1', 'TRUST_PROXY contains "999.1.1.1"'],
    ['TRUST_PROXY', '10.0.0.0/8,1.2.3.4/99', 'TRUST_PROXY contains "1.2.3.4/99"'],
    ['WEB_CONCURRENCY', '0', 'WEB_CONCURRENCY="0" is invalid: expected a whole number from 1 to 256'],
    ['NODE_ENV', 'production', 'DATABASE_URL is required when NODE_ENV=production (the default, a SQLite file in ./data, is for development)'],
    // a misspelling would turn the production rules off without a word
    ['NODE_ENV', 'Production', 'NODE_ENV="Production" is invalid: expected production, development or test (or unset, which is development)'],
    ['NODE_ENV', 'prod', 'NODE_ENV="prod" is invalid'],
    // set but blank would leave /metrics open without a word
    ['METRICS_TOKEN', ' ', 'METRICS_TOKEN is set but blank: give it a token, or leave it unset to serve /metrics without one'],
    ['METRICS_TOKEN', '', 'METRICS_TOKEN is set but blank'],
    // a password in a URL is never shown, also in a value too malformed to parse
    ['DATABASE_URL', 'mysql://app:S3cret@db.internal/fieldops', 'DATABASE_URL="mysql://app:***@db.internal/fieldops" is invalid'],
    ['DATABASE_URL', 'postgress://app@db/fieldops?password=S3cret', 'DATABASE_URL="postgress://app@db/fieldops?password=***" is invalid'],
    ['REDIS_URL', 'redis//:S3cret@10.0.0.1:6379', 'REDIS_URL="redis//:***@10.0.0.1:6379" is invalid'],
    ['REDIS_URL', 'redis://:my S3cret@10.0.0.1:6379', 'REDIS_URL="redis://:***@10.0.0.1:6379" is invalid'],
    ['DATABASE_URL', 'postgres:/app:S3cret@db/fieldops', 'DATABASE_URL="postgres:/app:***@db/fieldops" is invalid'],
    ['DATABASE_URL', 'postgress://app:p@S3cret@db/fieldops', 'DATABASE_URL="postgress://app:***@db/fieldops" is invalid'],
    ['PUBLIC_BASE_URL', 'fieldops.example.com', 'PUBLIC_BASE_URL="fieldops.example.com" is invalid: expected the origin clients reach this API at'],
    ['PUBLIC_BASE_URL', 'ftp://fieldops.example.com', 'PUBLIC_BASE_URL="ftp://fieldops.example.com" is invalid'],
    // a path would not reach the API (it is served at the root of its host), and /v1 would be doubled
    ['PUBLIC_BASE_URL', 'https://gateway.example.com/fieldops', 'no path, query, fragment or credentials: the API is served at the root of its host'],
    ['PUBLIC_BASE_URL', 'https://fieldops.example.com/v1', 'PUBLIC_BASE_URL="https://fieldops.example.com/v1" is invalid'],
    // what a URL parser would drop without a word
    ['PUBLIC_BASE_URL', 'https://fieldops.example.com?', 'PUBLIC_BASE_URL="https://fieldops.example.com?" is invalid'],
    ['PUBLIC_BASE_URL', 'https://fieldops.example.com#', 'PUBLIC_BASE_URL="https://fieldops.example.com#" is invalid'],
    ['PUBLIC_BASE_URL', 'http://:@fieldops.example.com', 'PUBLIC_BASE_URL="http://:***@fieldops.example.com" is invalid'],
    ['PUBLIC_BASE_URL', 'https://fieldops example.com', 'PUBLIC_BASE_URL="https://fieldops example.com" is invalid'],
    ['PUBLIC_BASE_URL', 'https://%zz', 'PUBLIC_BASE_URL="https://%zz" is invalid'],
    ['PUBLIC_BASE_URL', 'https://ops:S3cret@fieldops.example.com', 'PUBLIC_BASE_URL="https://ops:***@fieldops.example.com" is invalid'],
    // valid alone, not together with the rest
    ['RATE_LIMIT_STORE', 'redis', 'RATE_LIMIT_STORE=redis needs REDIS_URL'],
    ['RATE_LIMIT_STORE', 'postgres', 'RATE_LIMIT_STORE=postgres needs a Postgres DATABASE_URL'],
  ])('%s=%s is refused with a line naming it', (name, value, message) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(message);
    expect(() => loadConfig({ [name]: value })).not.toThrow('S3cret');
  });

  it('takes PUBLIC_BASE_URL as an origin, in its normal form', () => {
    expect(loadConfig({ PUBLIC_BASE_URL: 'https://Ops.Example.com:443/' }).publicBaseUrl).toBe('https://ops.example.com');
    expect(loadConfig({ PUBLIC_BASE_URL: 'http://10.0.0.5:8080' }).publicBaseUrl).toBe('http://10.0.0.5:8080');
    expect(loadConfig({}).publicBaseUrl).toBeUndefined();
  });

  it('takes NODE_ENV production, development, test or unset', () => {
    expect(loadConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://db/fieldops' }).production).toBe(true);
    for (const value of ['development', 'test', '', undefined]) expect(loadConfig({ NODE_ENV: value }).production).toBe(false);
  });
});

describe('npm start (runtime/main.ts)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-start-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('stops with one clear line for a bad variable', async () => {
    const result = await promisify(execFile)(TSX, ['runtime/main.ts'], { cwd: ROOT, env: { ...process.env, PORT: 'eighty' }, timeout: 30000 }).catch((e) => e);
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe('Configuration error: PORT="eighty" is invalid: expected a whole number from 0 to 65535');
  });

  it('on first start creates the database and one key with every scope, printed once with a curl line', async () => {
    const env = { ...process.env, DATABASE_URL: `sqlite:${path.join(dir, 'nested', 'fresh.sqlite')}`, PORT: '0', LOG_LEVEL: 'info' };
    const first = await startUntilListening(env);
    expect(first.stdout).toMatch(/No API key existed, so one was created with every scope in organization "default"/);
    const secret = /\n {2}(fop_[A-Za-z0-9_-]{43})\n/.exec(first.stdout)![1];
    expect(first.stdout).toContain(`curl -s -H "Authorization: Bearer ${secret}" http://127.0.0.1:${first.port}/v1/sites`);
    const res = await fetch(`http://127.0.0.1:${first.port}/v1/sites`, { headers: { Authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
    first.stop();

    const second = await startUntilListening(env);
    expect(second.stdout).not.toContain('fop_');
    second.stop();
  });

  it('with NODE_ENV=production creates no key (no secret in the logs) and says how to create the first one', async () => {
    const file = path.join(dir, 'production.sqlite');
    const env = { ...process.env, NODE_ENV: 'production', DATABASE_URL: `sqlite:${file}`, PORT: '0', LOG_LEVEL: 'info' };
    const server = await startUntilListening(env);
    for (let i = 0; i < 50 && !server.stderr().includes('No API key exists'); i++) await new Promise((r) => setTimeout(r, 100));
    server.stop();
    expect(server.stderr()).toContain('No API key exists. Create the first one with: node dist/scripts/keys.js create --scopes all --org default --name admin\n');
    expect(server.stdout + server.stderr()).not.toMatch(/fop_|No API key existed/);
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare('select count(*) as n from api_keys').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  });
});

/** Starts the server and resolves once it logs "listening" (with the port it got). */
function startUntilListening(env: NodeJS.ProcessEnv): Promise<{ stdout: string; stderr(): string; port: number; stop(): void }> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, ['runtime/main.ts'], { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`server did not start:\n${stdout}`)); }, 30000);
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      const listening = stdout.split('\n').map((l) => { try { return JSON.parse(l); } catch { return null; } }).find((l) => l?.msg === 'listening');
      if (listening) {
        clearTimeout(timer);
        resolve({ stdout, stderr: () => stderr, port: Number(new URL(listening.address).port), stop: () => child.kill('SIGTERM') });
      }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${stdout}`)); });
  });
}

const describePostgres = process.env.TEST_DATABASE_URL ? describe : describe.skip;
describePostgres('npm start on a Postgres database that does not exist', () => {
  it('stops with its reason on one line and no stack trace', async () => {
    const url = new URL(process.env.TEST_DATABASE_URL!);
    url.pathname = '/fieldops_never_created';
    const result = await promisify(execFile)(TSX, ['runtime/main.ts'], {
      cwd: ROOT, env: { ...process.env, PORT: '0', DATABASE_URL: url.toString() }, timeout: 30000,
    }).catch((e) => e);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('Cannot prepare the database of DATABASE_URL: database "fieldops_never_created" does not exist (create it first, or fix DATABASE_URL)');
    expect(result.stderr).not.toMatch(/^\s+at /m);
    expect(result.stdout).not.toMatch(/listening|fop_/);
  });

  it('names the schema to create when the search_path of DATABASE_URL names none that exists', async () => {
    const url = new URL(process.env.TEST_DATABASE_URL!);
    url.searchParams.set('options', '-c search_path="$user",fieldops_no_such_schema'); // "$user" names the role's own schema, which is not there either
    const result = await promisify(execFile)(TSX, ['runtime/main.ts'], {
      cwd: ROOT, env: { ...process.env, PORT: '0', DATABASE_URL: url.toString() }, timeout: 30000,
    }).catch((e) => e);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("(the schema DATABASE_URL's search_path names does not exist: create it first, `create schema fieldops_no_such_schema`, or fix DATABASE_URL)");
  });
});

describe('a stop signal while the server starts', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

  /** A first start on a new database that found Redis unreachable: it waits up to 3 s for it before it listens. */
  async function startWaitingForRedis() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-stop-starting-'));
    dirs.push(dir);
    const child = spawn(process.execPath, ['--require', require.resolve('tsx/cjs'), 'runtime/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: `sqlite:${path.join(dir, 'db.sqlite')}`, REDIS_URL: 'redis://127.0.0.1:1/0' },
    });
    let output = '';
    child.stdout.on('data', (chunk) => { output += chunk; });
    child.stderr.on('data', (chunk) => { output += chunk; });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    for (let i = 0; i < 200 && !output.includes('Redis unavailable'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(output).toContain('Redis unavailable');
    return { child, exited, output: () => output };
  }

  it('SIGTERM while it waits for Redis: it stops once that step is done, with exit 0, never listening, the first key shown', async () => {
    // the signal's default action ended it with 143 before its handlers were installed
    const { child, exited, output } = await startWaitingForRedis();
    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(output()).toContain('stopped while starting: nothing was served');
    expect(output()).not.toMatch(/"msg":"listening"|Try it/);
    // the first key was created: shown all the same, since the next start creates none
    expect(output()).toMatch(/It is shown only this once:\n\n  fop_\S+\n/);
  });

  it('a second signal while it starts stops it at once, with exit 1', async () => {
    const { child, exited, output } = await startWaitingForRedis();
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGINT');
    expect(await exited).toEqual({ code: 1, signal: null });
    expect(output()).toContain('SIGINT again while starting: stopping now');
    expect(output()).not.toContain('stopped while starting');
  });
});

describe('npm start on a port in use', () => {
  /** `npm start` on a port another program holds, on a new database, with `env`. */
  async function startOnTakenPort(env: NodeJS.ProcessEnv = {}) {
    const net = await import('node:net');
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-port-'));
    try {
      const result = await promisify(execFile)(TSX, ['runtime/main.ts'], {
        cwd: ROOT, env: { ...process.env, ...env, PORT: String(port), DATABASE_URL: `sqlite:${path.join(dir, 'db.sqlite')}` }, timeout: 30000,
      }).catch((e) => e);
      return { port, code: result.code as number, stdout: String(result.stdout), stderr: String(result.stderr) };
    } finally {
      blocker.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }

  it('stops with one line instead of a stack trace', async () => {
    const { port, ...result } = await startOnTakenPort();
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(`Cannot listen on 127.0.0.1:${port}: listen EADDRINUSE: address already in use 127.0.0.1:${port} (set PORT or HOST)`);
    // never claims to listen, nor offers a curl line to the port another program holds; the key
    // this first start created stays valid, so it is shown once all the same
    expect(result.stdout).not.toMatch(/listening|Try it|curl/);
    expect(result.stdout).toMatch(/It is shown only this once:\n\n  fop_\S+\n/);
  });

  it('with WEB_CONCURRENCY=2 too: the workers cannot listen, the primary stops, and the first key is still shown once', async () => {
    const { port, ...result } = await startOnTakenPort({ WEB_CONCURRENCY: '2' });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`Cannot listen on 127.0.0.1:${port}: bind EADDRINUSE`); // a cluster worker binds through the primary
    expect(result.stdout).not.toMatch(/Try it|curl/);
    expect(result.stdout.match(/It is shown only this once:\n\n  fop_\S+\n/g)).toHaveLength(1);
  });
});
