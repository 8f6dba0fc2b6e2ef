import path from 'node:path';
import proxyaddr from 'proxy-addr';

/** Server configuration: environment variables only (docs/architecture.md, "Running and configuration"), validated at start. */
export interface Config {
  /**
   * NODE_ENV=production: DATABASE_URL is required, and the server creates no first key on an
   * empty database (it would print a secret into the logs): the operator creates it with the key CLI.
   */
  production: boolean;
  port: number;
  host: string;
  /** `sqlite:` or `postgres:` URL; see parseDatabaseUrl. */
  databaseUrl: string;
  idempotencyTtlSeconds: number;
  /**
   * SQLite: how long a claim whose process stopped renewing it (renewed every second while the
   * request runs) is held before a retry may take it over. Keep it above the SQLite busy timeout
   * (5 s) plus a second. Postgres holds claims by a lock that ends with the owner's connection
   * and uses the lease only for claims committed by an older release.
   */
  idempotencyLeaseSeconds: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  maxBodyBytes: number;
  /** Origins allowed to call the API from a browser (CORS); empty means none. */
  corsOrigins: string[];
  /** How long events stay in the change feed (and can be delivered or replayed). */
  eventsRetentionDays: number;
  /** Whether the server process also runs the webhook delivery engine (`npm run worker` runs it alone). */
  webhookWorker: boolean;
  /** One delivery attempt's deadline, connection to last byte of the answer. */
  webhookTimeoutSeconds: number;
  /** Delay before each attempt of a delivery, in seconds: the first is usually 0 (at once). */
  webhookRetrySchedule: number[];
  /** Lifts the https-only and public-address rule for webhook targets (development, tests). */
  webhookAllowPrivateTargets: boolean;
  /** How long a worker holds a claimed delivery; a worker that dies leaves it to others after this. */
  webhookLeaseSeconds: number;
  rateLimit: RateLimitConfig;
  /** Redis for state shared by every server process (the rate limiter's counters); none when unset. */
  redisUrl?: string;
  /** express `trust proxy`: which proxies' X-Forwarded-For names the client address; none by default. */
  trustProxy: boolean | number | string[];
  /** How long a SIGTERM/SIGINT waits for requests in flight before the process exits anyway. */
  shutdownTimeoutSeconds: number;
  /** How long a request's headers and body may take to arrive (runtime/http/httpServer.ts). */
  requestTimeoutSeconds: number;
  /**
   * Postgres: how long the server and the delivery engine wait for the answer to one statement
   * before they give its connection up (storage/database.ts); not the migrations'.
   */
  databaseQueryTimeoutSeconds: number;
  /** Worker processes serving one port (node's cluster module); 1 serves from the main process. */
  webConcurrency: number;
  /** When set, GET /metrics needs `Authorization: Bearer <token>`. */
  metricsToken?: string;
  /**
   * The origin clients reach this deployment at (`https://fieldops.example.com`): the served
   * contract documents name it as their server, so an SDK generated from them calls it. Unset, they
   * name the contract's local server (`npm start` on 127.0.0.1:8080).
   */
  publicBaseUrl?: string;
  /**
   * `npm run worker` only: the port of its /healthz, /readyz and /metrics (on HOST), for an
   * orchestrator to probe and Prometheus to scrape; unset, the engine listens on nothing.
   */
  workerPort?: number;
}

export interface RateLimitConfig {
  /** Requests per minute per API key, every operation counted. */
  perMinute: number;
  /** Sensor-reading batches (POST /v1/sensor-readings) per minute per API key, counted besides perMinute. */
  ingestBatchesPerMinute: number;
  /** Failed authentications per minute per client address before the address is refused. */
  authFailuresPerMinute: number;
  /**
   * Where the counters live; `auto`: Redis when REDIS_URL is set, else Postgres on Postgres, else
   * memory. `off`: no limits and no RateLimit fields (a gateway in front limits instead).
   */
  store: 'auto' | 'memory' | 'redis' | 'postgres' | 'off';
  /** Prefix of the counters' keys, so that several deployments can share one Redis. */
  keyPrefix: string;
}

export class ConfigError extends Error {}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Standard Webhooks' schedule (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h …), with 10-hour steps
 * until about three days have passed since the event.
 */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE: readonly number[] = [0, 5, 300, 1800, 7200, 18000, 36000, 36000, 36000, 36000, 36000, 36000];

export const DEFAULT_DATABASE_URL = `sqlite:${path.join('data', 'fieldops.sqlite')}`;

/** Reads and validates the configuration; a bad value throws one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return checkedTogether({
    production: nodeEnv(env) === 'production',
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: nonEmpty(env, 'HOST', '127.0.0.1'),
    databaseUrl: databaseUrl(env),
    idempotencyTtlSeconds: integer(env, 'IDEMPOTENCY_TTL_SECONDS', 86400, 1, 30 * 86400),
    // above SQLite's 5-second busy timeout plus the second between renewals: a shorter lease could be taken over from a live request
    idempotencyLeaseSeconds: integer(env, 'IDEMPOTENCY_LEASE_SECONDS', 8, 7, 3600),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', LOG_LEVELS),
    maxBodyBytes: integer(env, 'MAX_BODY_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    corsOrigins: origins(env),
    ...webhookSettings(env),
    rateLimit: {
      perMinute: integer(env, 'RATE_LIMIT_PER_MINUTE', 600, 1, 10_000_000),
      ingestBatchesPerMinute: integer(env, 'RATE_LIMIT_INGEST_BATCHES_PER_MINUTE', 60, 1, 10_000_000),
      authFailuresPerMinute: integer(env, 'RATE_LIMIT_AUTH_FAILURES_PER_MINUTE', 30, 1, 10_000_000),
      store: oneOf(env, 'RATE_LIMIT_STORE', 'auto', ['auto', 'memory', 'redis', 'postgres', 'off'] as const),
      keyPrefix: nonEmpty(env, 'RATE_LIMIT_KEY_PREFIX', 'fop'),
    },
    redisUrl: redisUrl(env),
    trustProxy: trustProxy(env),
    shutdownTimeoutSeconds: integer(env, 'SHUTDOWN_TIMEOUT_SECONDS', 25, 1, 3600),
    requestTimeoutSeconds: integer(env, 'REQUEST_TIMEOUT_SECONDS', 30, 1, 3600),
    databaseQueryTimeoutSeconds: integer(env, 'DATABASE_QUERY_TIMEOUT_SECONDS', 15, 1, 3600),
    webConcurrency: integer(env, 'WEB_CONCURRENCY', 1, 1, 256),
    metricsToken: metricsToken(env),
    publicBaseUrl: publicBaseUrl(env),
    workerPort: optionalInteger(env, 'WORKER_PORT', 0, 65535),
  });
}

/** Settings that are each valid but do not go together: refused at start, as a bad value is. */
function checkedTogether(config: Config): Config {
  if (config.rateLimit.store === 'redis' && config.redisUrl === undefined) {
    throw new ConfigError('RATE_LIMIT_STORE=redis needs REDIS_URL');
  }
  if (config.rateLimit.store === 'postgres' && !/^postgres(ql)?:\/\//.test(config.databaseUrl)) {
    throw new ConfigError('RATE_LIMIT_STORE=postgres needs a Postgres DATABASE_URL');
  }
  return config;
}

function webhookSettings(env: NodeJS.ProcessEnv) {
  const webhookTimeoutSeconds = integer(env, 'WEBHOOK_TIMEOUT_SECONDS', 10, 1, 300);
  const webhookLeaseSeconds = integer(env, 'WEBHOOK_LEASE_SECONDS', Math.max(60, webhookTimeoutSeconds + 30), 2, 3600);
  // a lease shorter than an attempt would let a second worker send while the first still waits for its answer
  if (webhookLeaseSeconds <= webhookTimeoutSeconds) {
    throw new ConfigError(`WEBHOOK_LEASE_SECONDS=${webhookLeaseSeconds} is invalid: it must be longer than WEBHOOK_TIMEOUT_SECONDS (${webhookTimeoutSeconds})`);
  }
  return {
    eventsRetentionDays: integer(env, 'EVENTS_RETENTION_DAYS', 30, 1, 3650),
    webhookWorker: oneOf(env, 'WEBHOOK_WORKER', 'on', ['on', 'off'] as const) === 'on',
    webhookTimeoutSeconds,
    webhookRetrySchedule: retrySchedule(env),
    webhookAllowPrivateTargets: oneOf(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', 'false', ['true', 'false'] as const) === 'true',
    webhookLeaseSeconds,
  };
}

function retrySchedule(env: NodeJS.ProcessEnv): number[] {
  const value = raw(env, 'WEBHOOK_RETRY_SCHEDULE');
  if (value === undefined) return [...DEFAULT_WEBHOOK_RETRY_SCHEDULE];
  const steps = value.split(',').map((s) => s.trim());
  const week = 7 * 86400;
  if (steps.length > 50 || steps.some((s) => !/^\d+$/.test(s) || Number(s) > week)) {
    throw new ConfigError(`WEBHOOK_RETRY_SCHEDULE=${JSON.stringify(value)} is invalid: expected 1 to 50 comma-separated delays in seconds (0 to ${week}), e.g. 0,5,300`);
  }
  if (Number(steps[0]) !== 0) {
    throw new ConfigError(`WEBHOOK_RETRY_SCHEDULE=${JSON.stringify(value)} is invalid: the first delay is the first attempt, which is always made at once: start the list with 0`);
  }
  return steps.map(Number);
}

function raw(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`${name}=${JSON.stringify(value)} is invalid: expected a whole number from ${min} to ${max}`);
  }
  return Number(value);
}

/** A whole number like `integer`, or undefined when the variable is unset (a feature left off). */
function optionalInteger(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  return raw(env, name) === undefined ? undefined : integer(env, name, min, min, max);
}

function nonEmpty(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  return raw(env, name) ?? fallback;
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, fallback: T, allowed: readonly T[]): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) throw new ConfigError(`${name}=${JSON.stringify(value)} is invalid: expected one of ${allowed.join(', ')}`);
  return value as T;
}

/**
 * NODE_ENV: `production` turns on the production rules (Config.production); unset, `development`
 * and `test` are development. Anything else is refused: a misspelling (`Production`, `prod`)
 * would otherwise turn those rules off without a word.
 */
function nodeEnv(env: NodeJS.ProcessEnv): string | undefined {
  const value = env.NODE_ENV;
  if (value === undefined || value === '' || ['production', 'development', 'test'].includes(value)) return value;
  throw new ConfigError(`NODE_ENV=${JSON.stringify(value)} is invalid: expected production, development or test (or unset, which is development)`);
}

/**
 * METRICS_TOKEN: unset leaves /metrics open (a scraper inside the network); set, it is required.
 * Set but blank — a deployment template whose secret was missing — is refused rather than
 * leaving /metrics open without a word.
 */
function metricsToken(env: NodeJS.ProcessEnv): string | undefined {
  if (env.METRICS_TOKEN !== undefined && env.METRICS_TOKEN.trim() === '') {
    throw new ConfigError('METRICS_TOKEN is set but blank: give it a token, or leave it unset to serve /metrics without one');
  }
  return raw(env, 'METRICS_TOKEN');
}

/**
 * PUBLIC_BASE_URL: the origin clients reach the API at (scheme, host, optional port), answered in
 * its normal form (`https://Ops.Example.com:443/` → `https://ops.example.com`). No path: the API
 * is served at the root of its host — `Location` headers (`/v1/…`) and the docs page are
 * root-relative, so a proxy that mounted it under a prefix would break them, and a base URL
 * ending in `/v1` would make clients call `/v1/v1/…`. Nothing a URL parser would drop or rewrite
 * silently either (an empty query or fragment, credentials, spaces, backslashes).
 */
function publicBaseUrl(env: NodeJS.ProcessEnv): string | undefined {
  const value = raw(env, 'PUBLIC_BASE_URL');
  if (value === undefined) return undefined;
  const refuse = (why: string): never => {
    throw new ConfigError(`PUBLIC_BASE_URL=${JSON.stringify(withoutPassword(value))} is invalid: ${why}`);
  };
  if (!/^https?:\/\/[^/?#@\\\s]+\/?$/i.test(value)) {
    refuse('expected the origin clients reach this API at, such as https://fieldops.example.com (http or https, a host and an optional port; no path, query, fragment or credentials: the API is served at the root of its host)');
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return refuse('not a URL: expected https://host or https://host:port');
  }
  return url.origin;
}

/**
 * A connection URL as it may be shown (an error on stderr, a CLI's note): the password of its
 * user part, and a `password=` parameter, replaced by `***` — also in a value too malformed to
 * parse, since a typo in the scheme is the commonest mistake.
 */
export function withoutPassword(url: string): string {
  // the user part runs from the scheme's `//` (or its `:` when a slash is missing) to the last `@`:
  // whatever follows the user's `:` in it is the password, spaces and `@`s included
  const at = url.lastIndexOf('@');
  const slashes = url.indexOf('//');
  const start = slashes >= 0 && slashes < at ? slashes + 2 : url.indexOf(':') + 1;
  const colon = at < 0 ? -1 : url.indexOf(':', start);
  const masked = colon >= 0 && colon < at ? `${url.slice(0, colon + 1)}***${url.slice(at)}` : url;
  return masked.replace(/([?&]password=)[^&]*/gi, '$1***');
}

function databaseUrl(env: NodeJS.ProcessEnv): string {
  // in production a forgotten (or misspelled) DATABASE_URL must not start a server on a new,
  // empty SQLite file with a new first key
  if (raw(env, 'DATABASE_URL') === undefined && nodeEnv(env) === 'production') {
    throw new ConfigError('DATABASE_URL is required when NODE_ENV=production (the default, a SQLite file in ./data, is for development)');
  }
  const value = raw(env, 'DATABASE_URL') ?? DEFAULT_DATABASE_URL;
  if (!/^(sqlite:|postgres:\/\/|postgresql:\/\/)/.test(value)) {
    throw new ConfigError(`DATABASE_URL=${JSON.stringify(withoutPassword(value))} is invalid: expected sqlite:path/to/file.sqlite, sqlite:///absolute/path.sqlite or postgres://user@host:port/database`);
  }
  return value;
}

function origins(env: NodeJS.ProcessEnv): string[] {
  const value = raw(env, 'CORS_ORIGINS');
  if (value === undefined) return [];
  const list = value.split(',').map((o) => o.trim()).filter(Boolean);
  for (const origin of list) {
    if (origin !== '*' && !/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new ConfigError(`CORS_ORIGINS contains ${JSON.stringify(origin)}: expected a comma-separated list of origins like https://app.example.com, or *`);
    }
  }
  return list;
}

function redisUrl(env: NodeJS.ProcessEnv): string | undefined {
  const value = raw(env, 'REDIS_URL');
  if (value !== undefined && !/^rediss?:\/\/[^\s]+$/.test(value)) {
    throw new ConfigError(`REDIS_URL=${JSON.stringify(withoutPassword(value))} is invalid: expected redis://host:6379 or rediss://…`);
  }
  return value;
}

/**
 * TRUST_PROXY: unset or `false` trusts no proxy (the client address is the TCP peer); `true`
 * trusts every hop (only behind a proxy that overwrites X-Forwarded-For); a number trusts that
 * many hops; otherwise a comma-separated list of addresses, CIDR ranges or express's names
 * (`loopback`, `uniquelocal`, `linklocal`).
 */
function trustProxy(env: NodeJS.ProcessEnv): boolean | number | string[] {
  const value = raw(env, 'TRUST_PROXY');
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  const list = value.split(',').map((v) => v.trim()).filter(Boolean);
  for (const entry of list) {
    // compiled as express compiles the setting (proxy-addr), so that what passes here is what
    // express takes: an address that is not one (999.1.1.1) or a range past the address's bits
    // (1.2.3.4/99) stopped the server only when express compiled it, after the migrations
    try {
      proxyaddr.compile(entry);
    } catch {
      throw new ConfigError(`TRUST_PROXY contains ${JSON.stringify(entry)}: expected true, false, a number of hops, or addresses/CIDR ranges such as 10.0.0.0/8,loopback`);
    }
  }
  return list;
}

/**
 * The configuration from the environment, or — for a bad value — one line naming the variable
 * on stderr and exit code 2. For the entry points (`npm start`, `npm run worker`).
 */
export function configOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`Configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
}
