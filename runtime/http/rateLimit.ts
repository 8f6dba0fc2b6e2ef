import type { Request, Response } from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import ipaddr from 'ipaddr.js';
import { Redis } from 'ioredis';
import { RateLimiterAbstract, RateLimiterMemory, RateLimiterPostgres, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimitConfig } from '../config';
import { ApiError } from '../errors';
import { InactiveKeyError, type Principal } from '../auth/apiKeys';
import { dialectOf } from '../storage/databaseErrors';
import { COUNTERS_TABLE, createCountersTable } from '../storage/rateLimitCounters';
import { metrics } from '../observability/metrics';
import { contextOf } from './requestContext';

/**
 * Rate limits (rate-limiter-flexible), counted where every server process sees the same
 * numbers when there is more than one: Redis when REDIS_URL is set, the Postgres store when the
 * API runs on Postgres without Redis, process memory otherwise (one process on SQLite needs no
 * setup; several processes on SQLite without Redis each count on their own, see README).
 *
 * Three policies, each a fixed one-minute window:
 * - `per-key`: every request of an API key;
 * - `ingest`: sensor-reading batches of an API key (one point per batch, whatever its size),
 *   counted besides `per-key` because a batch costs far more than a read;
 * - `auth-failures`: failed authentications per client address. Once an address has used up
 *   this budget, every /v1 request from it is refused until the window ends, a valid key
 *   included — otherwise a guesser would still tell a right guess (200) from a wrong one. A key
 *   that exists but was revoked or expired is no guess and is not counted (auth/apiKeys.ts,
 *   InactiveKeyError).
 *
 * The answers carry the `RateLimit-Policy` and `RateLimit` fields of
 * draft-ietf-httpapi-ratelimit-headers-10 (Structured Field Lists of String items with
 * `q`/`w` and `r`/`t` parameters). A store that fails (Redis or Postgres down) falls back to a
 * per-process memory limiter with the same budgets, so the limiter never takes the API down.
 * Redis that stops answering on an open connection (a partition, a paused Redis) counts as
 * failed after REDIS_COMMAND_TIMEOUT_MS, and closing the limiter never waits on it for longer
 * than REDIS_QUIT_TIMEOUT_MS (test/rateLimitRedisFreeze.test.ts).
 */

export type RateLimitStore = 'memory' | 'redis' | 'postgres' | 'off';

export const INGEST_OPERATION = 'ingestSensorReadings';
const WINDOW_SECONDS = 60;

/**
 * How long a Redis command (and the connection under it) may go unanswered before it counts as
 * failed and the memory insurance answers. Every /v1 request waits on the limiter — the address
 * check, then the key's count — so this bounds what a frozen Redis adds to a request: at most
 * twice this, about a second, for the requests caught by the freeze, and nothing after them,
 * since the silent connection is then dropped and the insurance answers without asking Redis
 * until it is back. A limiter command is one round trip of a small script that a healthy Redis
 * answers in a few milliseconds at most, so half a second leaves a wide margin for a busy Redis
 * or network (no needless fallback to per-process counting) while staying far below any
 * client's own timeout.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 500;

/** How long closing the limiter waits for Redis to acknowledge QUIT before dropping the connection. */
export const REDIS_QUIT_TIMEOUT_MS = 1000;

interface Policy {
  name: 'per-key' | 'ingest' | 'auth-failures';
  quota: number;
  limiter: RateLimiterAbstract;
}

export interface RateLimitsOptions {
  config: RateLimitConfig;
  db: Knex;
  redisUrl?: string;
  /** Prefix of every counter's key: keeps deployments (or test runs) sharing one Redis apart. */
  keyPrefix: string;
  logger: Logger;
}

export interface RateLimits {
  readonly store: RateLimitStore;
  /**
   * Authenticates the request's key and counts it against its budgets; throws 429 RATE_LIMITED
   * over a budget, and counts a failed authentication against the client address. Sets the
   * RateLimit fields on `res` either way.
   */
  admit(req: Request, res: Response, operationId: string, authenticate: () => Promise<Principal>): Promise<Principal>;
  /** Resolves once the store is usable (Redis connected, the Postgres table created), or after a short wait. */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export function chooseStore(config: RateLimitConfig, db: Knex, redisUrl: string | undefined): RateLimitStore {
  if (config.store !== 'auto') return config.store;
  if (redisUrl) return 'redis';
  return dialectOf(db) === 'postgres' ? 'postgres' : 'memory';
}

export function createRateLimits(options: RateLimitsOptions): RateLimits {
  const { config, db, logger } = options;
  const store = chooseStore(config, db, options.redisUrl);
  if (store === 'redis' && !options.redisUrl) throw new Error('RATE_LIMIT_STORE=redis needs REDIS_URL');
  if (store === 'postgres' && dialectOf(db) !== 'postgres') throw new Error('RATE_LIMIT_STORE=postgres needs a Postgres DATABASE_URL');
  if (store === 'off') {
    const admitWithoutLimits = async (_req: Request, res: Response, _operationId: string, authenticate: () => Promise<Principal>) => {
      const principal = await authenticate();
      contextOf(res).apiKeyId = principal.keyId;
      contextOf(res).organizationId = principal.orgId;
      return principal;
    };
    return { store, admit: admitWithoutLimits, ready: async () => undefined, close: async () => undefined };
  }

  let redis: Redis | undefined;
  let tableReady: Promise<void> | undefined;
  const pending: Promise<void>[] = [];
  const timers: RateLimiterPostgres[] = [];

  if (store === 'redis') {
    // no offline queue: while Redis is away a command fails at once and the memory insurance
    // answers, instead of requests queueing behind a reconnect. A connection that stays open but
    // answers nothing (a partition, a paused Redis) never fails by itself: `commandTimeout` fails
    // each command left unanswered, and `socketTimeout` drops a connection that received nothing
    // for as long while commands wait, so it reconnects — until then the client is not ready and
    // the insurance answers without asking it (`rejectIfRedisNotReady` below), and the drop is
    // logged like any other Redis error. Commands of a dropped connection are not sent again on
    // reconnect: their requests were already answered from memory, and a late increment would
    // count them twice.
    redis = new Redis(options.redisUrl!, {
      enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS, socketTimeout: REDIS_COMMAND_TIMEOUT_MS, autoResendUnfulfilledCommands: false,
    });
    let warned = 0;
    redis.on('error', (err) => {
      if (Date.now() - warned > 30_000) {
        warned = Date.now();
        logger.warn({ err: err.message }, 'Redis unavailable: rate limits are counted per process until it returns');
      }
    });
    const client = redis;
    pending.push(new Promise<void>((resolve) => {
      if (client.status === 'ready') resolve();
      client.once('ready', () => resolve());
    }));
  }

  // The Postgres store's failures reach no log by themselves (the library answers from the
  // insurance without a word): the insurance says when it answers, at most every 30 s, and the
  // table is created again, for an operator who dropped it (it is disposable) while servers ran,
  // which left them counting per process until a restart
  let tableWarnedAt = 0;
  const tableFailed = (): void => {
    if (Date.now() - tableWarnedAt < 30_000) return;
    tableWarnedAt = Date.now();
    logger.warn(`rate-limit table ${COUNTERS_TABLE} did not answer: rate limits are counted per process until it does (creating it again if it is gone)`);
    void createCountersTable(db).catch(() => undefined);
  };

  const limiter = (name: Policy['name'], points: number): RateLimiterAbstract => {
    const common = { keyPrefix: `${options.keyPrefix}:${name}`, points, duration: WINDOW_SECONDS };
    const insurance = store === 'postgres' ? new TellingInsurance(common, tableFailed) : new RateLimiterMemory(common);
    if (store === 'memory') return insurance;
    if (store === 'redis') {
      // a key over its budget is refused from process memory until the window ends: an
      // abusive client costs no Redis round trip
      return new RateLimiterRedis({ ...common, storeClient: redis, rejectIfRedisNotReady: true, insuranceLimiter: insurance, inMemoryBlockOnConsumed: points + 1 });
    }
    // an UNLOGGED table created on start (storage/rateLimitCounters.ts says why)
    tableReady ??= createCountersTable(db).catch((err: Error) => {
      logger.warn({ err: err.message }, 'rate-limit table not created yet: counting per process');
    });
    pending.push(tableReady);
    const pg = new RateLimiterPostgres({
      ...common, storeClient: db, storeType: 'knex', tableName: COUNTERS_TABLE, tableCreated: true,
      insuranceLimiter: insurance, inMemoryBlockOnConsumed: points + 1,
    });
    timers.push(pg);
    return pg;
  };

  const perKey: Policy = { name: 'per-key', quota: config.perMinute, limiter: limiter('per-key', config.perMinute) };
  const ingest: Policy = { name: 'ingest', quota: config.ingestBatchesPerMinute, limiter: limiter('ingest', config.ingestBatchesPerMinute) };
  const authFailures: Policy = { name: 'auth-failures', quota: config.authFailuresPerMinute, limiter: limiter('auth-failures', config.authFailuresPerMinute) };
  const perKeyExceeded = `Rate limit exceeded: ${perKey.quota} requests per minute for this API key`;

  async function admit(req: Request, res: Response, operationId: string, authenticate: () => Promise<Principal>): Promise<Principal> {
    const address = clientAddress(req);
    // the address check and the key lookup are independent: run them side by side
    const [failures, outcome] = await Promise.all([
      authFailures.limiter.get(address),
      authenticate().then((principal) => ({ principal }), (error: unknown) => ({ error })),
    ]);
    if (failures && failures.consumedPoints >= authFailures.quota) {
      setFields(res, [[authFailures, failures]]);
      throw limited(res, [[authFailures, failures]], 'Too many failed authentications from this address');
    }
    if ('error' in outcome) {
      // a revoked or expired key is no guess: counted against that key's own budget, like any
      // request of it, not against its address (and logged with its id)
      if (outcome.error instanceof InactiveKeyError) {
        contextOf(res).apiKeyId = outcome.error.keyId;
        const counted = await consume(perKey, outcome.error.keyId);
        setFields(res, [[perKey, counted.result]]);
        if (counted.over) throw limited(res, [[perKey, counted.result]], perKeyExceeded);
        throw outcome.error;
      }
      if (outcome.error instanceof ApiError && outcome.error.code === 'UNAUTHENTICATED') {
        const counted = await consume(authFailures, address);
        setFields(res, [[authFailures, counted.result]]);
        if (counted.over) throw limited(res, [[authFailures, counted.result]], 'Too many failed authentications from this address');
      }
      throw outcome.error;
    }
    const principal = outcome.principal;
    contextOf(res).apiKeyId = principal.keyId;
    contextOf(res).organizationId = principal.orgId;
    const policies = operationId === INGEST_OPERATION ? [perKey, ingest] : [perKey];
    const results = await Promise.all(policies.map((p) => consume(p, principal.keyId)));
    const pairs = policies.map((p, i) => [p, results[i].result] as const);
    setFields(res, pairs);
    const over = pairs.filter((_, i) => results[i].over);
    if (over.length) {
      throw limited(res, over, over.some(([p]) => p.name === 'ingest')
        ? `Rate limit exceeded: ${ingest.quota} sensor-reading batches per minute for this API key`
        : perKeyExceeded);
    }
    contextOf(res).rateLimit = 'allowed';
    return principal;
  }

  return {
    store,
    admit,
    async ready() {
      await Promise.race([Promise.all(pending), new Promise((r) => setTimeout(r, 3000).unref())]);
    },
    async close() {
      await tableReady; // never rejects; the pool must not close under it
      for (const pg of timers) clearTimeout((pg as unknown as { _clearExpiredTimeoutId?: NodeJS.Timeout })._clearExpiredTimeoutId);
      if (redis) await closeRedis(redis);
    },
  };
}

/**
 * QUIT, so that Redis sees a clean close; a Redis that does not acknowledge it within
 * REDIS_QUIT_TIMEOUT_MS (frozen, or away) is disconnected instead, so that a shutdown never
 * waits on it.
 */
async function closeRedis(client: Redis): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), REDIS_QUIT_TIMEOUT_MS);
  });
  try {
    const outcome = await Promise.race([client.quit().then(() => 'quit' as const, () => 'failed' as const), late]);
    // (a client already ended needs nothing: ioredis would arm a 2 s timer for its closed socket)
    if (outcome !== 'quit' && client.status !== 'end') client.disconnect();
  } finally {
    clearTimeout(timer);
  }
}

async function consume(policy: Policy, key: string): Promise<{ over: boolean; result: RateLimiterRes }> {
  try {
    return { over: false, result: await policy.limiter.consume(key) };
  } catch (err) {
    if (err instanceof RateLimiterRes) return { over: true, result: err };
    throw err; // the store failed and so did its insurance: not a verdict
  }
}

type Counted = readonly (readonly [Policy, RateLimiterRes])[];

const resetSeconds = (r: RateLimiterRes) => Math.max(1, Math.ceil(r.msBeforeNext / 1000));

function setFields(res: Response, counted: Counted): void {
  res.setHeader('RateLimit-Policy', counted.map(([p]) => `"${p.name}";q=${p.quota};w=${WINDOW_SECONDS}`).join(', '));
  res.setHeader('RateLimit', counted.map(([p, r]) => `"${p.name}";r=${r.remainingPoints};t=${resetSeconds(r)}`).join(', '));
}

function limited(res: Response, over: Counted, message: string): ApiError {
  contextOf(res).rateLimit = `limited:${over.map(([p]) => p.name).join(',')}`;
  for (const [p] of over) metrics.rateLimited.inc({ policy: p.name });
  const retryAfter = Math.max(...over.map(([, r]) => resetSeconds(r)));
  return new ApiError('RATE_LIMITED', `${message}; retry after ${retryAfter} s`, undefined, { 'Retry-After': String(retryAfter) });
}

/**
 * The address failed authentications are counted against: the client as express sees it
 * (TRUST_PROXY decides whether X-Forwarded-For counts), IPv4-mapped IPv6 as IPv4, and IPv6 by
 * its /64 — one host usually holds a whole /64 and could otherwise rotate addresses freely.
 */
export function clientAddress(req: Request): string {
  const raw = req.ip ?? req.socket.remoteAddress ?? 'unknown';
  if (!ipaddr.isValid(raw)) return raw;
  const address = ipaddr.process(raw);
  if (address.kind() === 'ipv4') return address.toString();
  const parts = (address as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16));
  return `${parts.join(':')}::/64`;
}

/**
 * The memory insurance of the Postgres store, which tells `failed` each time it answers a count:
 * the library asks it only when the store failed.
 */
class TellingInsurance extends RateLimiterMemory {
  constructor(options: ConstructorParameters<typeof RateLimiterMemory>[0], private readonly failed: () => void) {
    super(options);
  }

  consume(...args: Parameters<RateLimiterMemory['consume']>): ReturnType<RateLimiterMemory['consume']> {
    this.failed();
    return super.consume(...args);
  }
}
