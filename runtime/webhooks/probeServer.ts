import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ApiError, errorBody } from '../errors';
import { newRequestId } from '../ids';
import { metricsAccessError, metricsText, METRICS_CONTENT_TYPE } from '../observability/metrics';
import { checkReadiness, notReady, READY_BODY } from '../observability/readiness';
import { pendingMigrations } from '../storage/migrate';

/**
 * WORKER_PORT: the delivery engine run alone (`npm run worker`) has no API to answer an
 * orchestrator's probes or Prometheus' scrapes, so it answers them on a port of its own, with
 * the API server's answers (runtime/http/publicRoutes.ts): `/healthz`, `/readyz` (the same
 * readiness check, observability/readiness.ts, and besides it the engine must be running), and
 * `/metrics` (the same registry, where the engine counts its deliveries). Anything else is 404.
 * Plain node:http: three routes need no express.
 */

/** Where the engine is: waiting for the schema, delivering, or finishing its attempts to exit. */
export type EnginePhase = 'waiting' | 'running' | 'stopping';

export interface ProbeServerOptions {
  db: Knex;
  host: string;
  port: number;
  metricsToken?: string;
  /** How long a request's headers may take to arrive (REQUEST_TIMEOUT_SECONDS, as the API server). */
  requestTimeoutSeconds: number;
  logger: Logger;
  phase(): EnginePhase;
}

export interface ProbeServer {
  /** The port it listens on (WORKER_PORT=0 picks one). */
  port: number;
  /** Stops listening and closes every connection, a probe in flight included. */
  close(): Promise<void>;
}

/** Listens on `host:port`; rejects with the listen error (a port in use) before answering anything. */
export async function listenForProbes(options: ProbeServerOptions): Promise<ProbeServer> {
  const server = http.createServer((req, res) => {
    answer(req, options).then(
      (reply) => send(res, reply),
      (err) => {
        options.logger.error({ err, url: req.url }, 'answering a probe failed');
        send(res, failure(new ApiError('INTERNAL', 'Internal server error')));
      },
    );
  });
  server.requestTimeout = options.requestTimeoutSeconds * 1000;
  server.headersTimeout = options.requestTimeoutSeconds * 1000;
  await listen(server, options.port, options.host);
  server.on('error', (err) => options.logger.error({ err }, 'the probe listener failed'));
  const address = server.address();
  const port = address && typeof address === 'object' ? address.port : options.port;
  options.logger.info({ address: `http://${options.host}:${port}` }, 'probes listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // a scraper's keep-alive connection would otherwise hold the close open
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

interface Reply {
  status: number;
  contentType: string;
  body: string;
  headers?: Record<string, string>;
}

async function answer(req: IncomingMessage, options: ProbeServerOptions): Promise<Reply> {
  // HEAD as GET: node leaves the body out
  const path = (req.url ?? '/').split('?')[0];
  if (req.method !== 'GET' && req.method !== 'HEAD') return failure(notFound(req, path));
  switch (path) {
    case '/healthz':
      // liveness only, as the API server's: a database outage must not get the engine restarted
      return json(200, { status: 'ok' });
    case '/readyz':
      return readiness(options);
    case '/metrics': {
      const refused = metricsAccessError(req.headers.authorization, options.metricsToken);
      if (refused) return failure(refused);
      return { status: 200, contentType: METRICS_CONTENT_TYPE, body: await metricsText() };
    }
    default:
      return failure(notFound(req, path));
  }
}

async function readiness(options: ProbeServerOptions): Promise<Reply> {
  const unavailable = (message: string) => failure(notReady(message));
  // a stopping engine's database is about to close: not asked then
  const check = options.phase() === 'stopping' ? undefined : await checkReadiness(() => pendingMigrations(options.db));
  // read again once the database answered: a shutdown may have begun meanwhile, and is the reason then
  const phase = options.phase();
  if (phase === 'stopping' || !check) return unavailable('The webhook delivery engine is shutting down');
  if (!check.ready) return unavailable(check.reason);
  // the schema just became current: the engine starts at its next look (runtime/webhooks/workerMain.ts)
  if (phase === 'waiting') return unavailable('The webhook delivery engine has not started yet');
  return json(200, READY_BODY);
}

function notFound(req: IncomingMessage, path: string): ApiError {
  return new ApiError('NOT_FOUND', `No route ${req.method} ${path}: this port answers GET /healthz, /readyz and /metrics`);
}

function json(status: number, body: unknown): Reply {
  return { status, contentType: 'application/json; charset=utf-8', body: JSON.stringify(body) };
}

/** The API's error body (errors.ts) with the error's status and headers, and its request id as the API sends it. */
function failure(error: ApiError): Reply {
  const requestId = newRequestId();
  return { ...json(error.status, errorBody(error, requestId)), headers: { ...error.headers, 'X-Request-Id': requestId } };
}

function send(res: ServerResponse, reply: Reply): void {
  res.writeHead(reply.status, { ...reply.headers, 'Content-Type': reply.contentType, 'Content-Length': Buffer.byteLength(reply.body) });
  res.end(reply.body);
}
