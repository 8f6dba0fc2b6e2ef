import express, { Express, NextFunction, Request, Response } from 'express';
import cors from 'cors';
import OpenAPIBackend, { Context } from 'openapi-backend';
import pino, { Logger } from 'pino';
import type { Knex } from 'knex';
import { Config } from '../config';
import { ApiError, unauthenticated } from '../errors';
import { authenticate, Principal } from '../auth/apiKeys';
import { setDeprecationHeaders, DeprecationInfo } from './deprecation';
import { operations, OperationId } from '../../generated/operations';
import { purgeExpiredIdempotencyKeys } from '../idempotency/purge';
import { purgeExpiredEvents } from '../domain/events';
import { everyInterval } from '../periodic';
import { runOperation, PipelineDeps } from './operationPipeline';
import { renderError } from './errorRendering';
import { requestLog } from './requestLog';
import { contextOf } from './requestContext';
import { publicRoutes } from './publicRoutes';
import { contractDocument } from './contractDocuments';
import { precompileRoutes } from './routeTable';
import { createRateLimits, RateLimits } from './rateLimit';
import { observeDatabasePool, observeWebhookBacklog } from '../observability/metrics';
import { countUndelivered } from '../storage/repositories/webhookDeliveriesRepository';
import { requestMetrics } from './requestMetrics';

export interface AppOptions {
  /** The database the app uses (already migrated); the caller closes it. */
  db: Knex;
  logger?: Logger;
  /** How often expired idempotency keys are purged (ms); 0 turns the timer off. */
  purgeIntervalMs?: number;
  /**
   * The operation index the deprecation headers are read from; generated/operations.ts when
   * not given. Tests pass the index generated from a copy of the contract that marks an
   * operation deprecated (test/deprecation.test.ts), so the headers are proved to follow the
   * generated index alone. Production never sets it.
   */
  deprecationIndex?: Readonly<Record<string, DeprecationInfo>>;
}

export interface App {
  app: Express;
  rateLimits: RateLimits;
  /** Resolves once the rate limiter's store is usable (or after a short wait: it falls back to memory meanwhile). */
  ready(): Promise<void>;
  /** Stops background work (the purge timer) and the rate limiter's Redis connection. Does not close the database. */
  close(): Promise<void>;
}

/**
 * Builds the express app without listening: tests use it in-process with supertest,
 * runtime/main.ts listens. openapi-backend routes each request to its operationId; the
 * contract's own 2020-12 validators (generated/) validate it, not openapi-backend's Ajv.
 */
export function createApp(config: Config, options: AppOptions): App {
  const logger = options.logger ?? pino({ level: config.logLevel });
  const deprecationIndex = options.deprecationIndex ?? operations;
  const deps: PipelineDeps = {
    db: options.db,
    config,
    idempotency: { ttlSeconds: config.idempotencyTtlSeconds, leaseSeconds: config.idempotencyLeaseSeconds },
    maxBodyBytes: config.maxBodyBytes,
  };
  const rateLimits = createRateLimits({ config: config.rateLimit, db: options.db, redisUrl: config.redisUrl, keyPrefix: config.rateLimit.keyPrefix, logger });
  observeDatabasePool(options.db);
  observeWebhookBacklog((cap) => countUndelivered(options.db, cap), (err) => logger.warn({ err }, 'metrics: the webhook backlog could not be counted; webhook_deliveries_pending reads NaN'));

  const api = new OpenAPIBackend({
    definition: structuredClone(contractDocument) as never, // openapi-backend dereferences in place
    validate: false,
    quick: true,
    strict: true,
  });
  type Args = [Request, Response];
  const handlers: Record<string, (c: Context, req: Request, res: Response) => Promise<void>> = {};
  for (const operationId of Object.keys(operations) as OperationId[]) {
    handlers[operationId] = (c, req, res) =>
      runOperation(deps, operationId, c.security!.bearerAuth as Principal, c.request.params as Record<string, string>, req, res);
  }
  // authentication and rate limits are openapi-backend's security handler for the contract's
  // bearerAuth scheme; its result (the principal) or its error reaches the operation through the context
  api.registerSecurityHandler('bearerAuth', (c: Context, req: Request, res: Response) =>
    rateLimits.admit(req, res, c.operation!.operationId!, async () => authenticate(deps.db, singleAuthorization(req))));
  /**
   * A /v1 request that matches no operation still counts against its caller's budget and
   * carries the RateLimit fields, like every /v1 answer: the key's budget when the key is valid,
   * else the address's failed-authentication budget. It still answers 404/405 (or 429 over a
   * budget), never 401: an unknown path is unknown whoever asks.
   */
  const countUnrouted = async (req: Request, res: Response): Promise<void> => {
    if (!req.path.startsWith('/v1/') && req.path !== '/v1') return;
    try {
      await rateLimits.admit(req, res, 'none', async () => authenticate(deps.db, singleAuthorization(req)));
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'UNAUTHENTICATED') throw err;
    }
  };
  api.register({
    ...handlers,
    postRoutingHandler: async (c: Context, _req: Request, res: Response) => {
      if (!c.operation) return; // also called when routing failed (404/405)
      const op = operations[c.operation.operationId as OperationId];
      Object.assign(contextOf(res), { operationId: op.operationId, route: op.path });
      setDeprecationHeaders(res, deprecationIndex[op.operationId] ?? op);
    },
    unauthorizedHandler: async (c: Context) => {
      const failure = (c.security?.bearerAuth as { error?: unknown } | undefined)?.error;
      // an ApiError (401, 429) as it is; anything else (the database unreachable) is rendered as such, not as a 401
      throw failure instanceof Error ? failure : unauthenticated();
    },
    notFound: async (_c: Context, req: Request, res: Response) => {
      await countUnrouted(req, res);
      throw new ApiError('NOT_FOUND', `No route ${req.method} ${req.path}`);
    },
    methodNotAllowed: async (_c: Context, req: Request, res: Response) => {
      await countUnrouted(req, res);
      const allowed = ['get', 'post', 'put', 'patch', 'delete'].filter((method) => api.router.matchOperation({ method, path: req.path, headers: {} }));
      res.set('Allow', allowed.map((m) => m.toUpperCase()).join(', '));
      throw new ApiError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${req.path}; allowed: ${allowed.map((m) => m.toUpperCase()).join(', ')}`);
    },
  } as Record<string, (c: Context, ...args: Args) => Promise<void>>);
  void api.init(); // quick mode with an in-memory document: the router is ready when init() returns
  // openapi-backend's router redoes its per-contract work on every request (operation list,
  // a RegExp per path template, the request parsed twice): done once here (routeTable.ts;
  // docs/architecture.md, "Known traps in the stack")
  precompileRoutes(api.router);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  app.use(requestLog(logger));
  app.use(requestMetrics());
  if (config.corsOrigins.length) app.use(corsFor(config.corsOrigins));
  // the operations' paths (/v1/…) skip the public routes' router, whose routes express would
  // otherwise try one by one on every API request
  const publicRouter = publicRoutes(options.db, { metricsToken: config.metricsToken, publicBaseUrl: config.publicBaseUrl });
  app.use((req: Request, res: Response, next: NextFunction) => (req.path.startsWith('/v1/') ? next() : publicRouter(req, res, next)));
  app.use((req: Request, res: Response, next: NextFunction) => {
    api
      // HEAD is GET without the body (Node drops it): route it as GET
      .handleRequest({ method: req.method === 'HEAD' ? 'GET' : req.method, path: req.path, query: req.query as Record<string, string>, headers: req.headers as Record<string, string> }, req, res)
      .catch(next);
  });
  app.use(renderError);

  // expired idempotency rows and events are removed off the request path; several processes
  // may all purge, the deletes are idempotent
  const stopPurge = everyInterval(options.purgeIntervalMs ?? 10 * 60 * 1000, logger, {
    'idempotency purge': (stopping) => purgeExpiredIdempotencyKeys(options.db, { stopping }),
    'event purge': (stopping) => purgeExpiredEvents(options.db, config.eventsRetentionDays, { stopping }),
  });
  return {
    app,
    rateLimits,
    ready: () => rateLimits.ready(),
    close: async () => {
      await stopPurge();
      await rateLimits.close();
    },
  };
}

/**
 * Response headers a browser client may read (CORS hides all but a few by default): the request
 * id to quote in a report, the idempotency replay flag, the deprecation signals, the created
 * resource's address, and the rate-limit headers (Retry-After with 429 and 503; RateLimit-Policy
 * and RateLimit on every /v1 answer; the older draft's three fields for clients that look for them).
 */
export const CORS_EXPOSED_HEADERS = [
  'X-Request-Id', 'Idempotent-Replayed', 'Deprecation', 'Sunset', 'Link', 'Location', 'Allow', 'WWW-Authenticate',
  'Retry-After', 'RateLimit', 'RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset',
];

/**
 * CORS for browser clients of the origins in CORS_ORIGINS (`*` for any). A request from any
 * other origin gets no CORS header at all, so the browser withholds the answer; a preflight
 * from such an origin falls through to the router (405). Keys travel in `Authorization`, not
 * cookies, so credentials are not allowed.
 */
function corsFor(origins: readonly string[]) {
  const anyOrigin = origins.includes('*');
  const allowed = new Set(origins);
  const middleware = cors((req, callback) => {
    const origin = req.headers.origin;
    if (!anyOrigin && (origin === undefined || !allowed.has(origin))) return callback(null, { origin: false });
    callback(null, {
      origin: anyOrigin ? '*' : origin,
      methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
      allowedHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key'],
      exposedHeaders: CORS_EXPOSED_HEADERS,
      maxAge: 600,
      optionsSuccessStatus: 204,
    });
  });
  return (req: Request, res: Response, next: NextFunction): void => {
    // the answer depends on Origin when only some origins are allowed: caches must keep them apart
    if (!anyOrigin) res.vary('Origin');
    middleware(req, res, next);
  };
}

/**
 * The request's one Authorization header. Node keeps only the first of several, so a request
 * carrying two (a proxy adding its own, a client bug) would be answered with whichever came
 * first; it is refused instead, as two Idempotency-Keys are.
 */
function singleAuthorization(req: Request): string | undefined {
  const values = req.headersDistinct.authorization ?? [];
  if (values.length > 1) throw unauthenticated('Send the Authorization header once');
  return values[0];
}
