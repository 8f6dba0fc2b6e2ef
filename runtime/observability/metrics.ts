import cluster from 'node:cluster';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Knex } from 'knex';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, register } from 'prom-client';
import { ApiError, unauthenticated } from '../errors';

/**
 * Prometheus metrics (prom-client). Every metric lives in prom-client's default registry,
 * exported here as `registry`: other modules register their own counters and gauges on it
 * (`new Counter({ name, help, registers: [registry] })`) and they appear on GET /metrics.
 *
 * With WEB_CONCURRENCY > 1 each worker counts on its own; the worker that answers /metrics asks
 * the primary process, which collects every worker's registry and combines them with prom-client's
 * AggregatorRegistry.aggregate (serveClusterMetrics).
 */
export const registry = register;

collectDefaultMetrics({ register: registry });
// a limit each process has, not a count: a cluster reports it as it is, not once per worker summed
// (prom-client's other default gauges are counts, which sum, or set their own rule)
const maxFds = registry.getSingleMetric('process_max_fds') as { aggregator?: string } | undefined;
if (maxFds) maxFds.aggregator = 'max';

// a worker of a cluster sends its registry to the primary when asked (serveClusterMetrics)
if (cluster.isWorker) {
  process.on('message', (message: { type?: string; id?: string }) => {
    if (message?.type !== 'fop:metrics-collect') return;
    registry.getMetricsAsJSON().then(
      (metrics) => process.send?.({ type: 'fop:metrics-collected', id: message.id, metrics }),
      (err: Error) => process.send?.({ type: 'fop:metrics-collected', id: message.id, error: err.message }),
    );
  });
}

export const metrics = {
  requests: new Counter({
    name: 'http_requests_total',
    help: 'Answered requests by operationId and status (the probes are getHealth and getReadiness; operation "none" for /metrics, the contract documents, the docs page and paths that match no operation)',
    labelNames: ['operation', 'status'] as const,
    registers: [registry],
  }),
  duration: new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from the request to the end of its answer, by operationId and status',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  }),
  inFlight: new Gauge({ name: 'http_requests_in_flight', help: 'Requests being answered now', registers: [registry] }),
  idempotentReplays: new Counter({ name: 'idempotent_replays_total', help: 'Writes answered with a stored answer (Idempotent-Replayed: true)', registers: [registry] }),
  idempotencyConflicts: new Counter({
    name: 'idempotency_conflicts_total',
    help: '409 IDEMPOTENCY_KEY_REUSED and IDEMPOTENCY_IN_PROGRESS answers, by code',
    labelNames: ['code'] as const,
    registers: [registry],
  }),
  webhookAttempts: new Counter({
    name: 'webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts by outcome: succeeded, failed (retried later) or abandoned (410, or the whole retry schedule failed); deliveries given up without an outcome are counted in webhook_deliveries_given_up_total',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  webhookGivenUp: new Counter({
    name: 'webhook_deliveries_given_up_total',
    help: 'Webhook deliveries abandoned when they were due instead of being sent, by reason: event_purged (the retention removed the event first) or last_attempt_lost (the last attempt of the schedule got no stored outcome: its process stopped or stalled past its lease)',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  rateLimited: new Counter({
    name: 'rate_limited_requests_total',
    help: 'Requests refused with 429 RATE_LIMITED, by the policy that refused them',
    labelNames: ['policy'] as const,
    registers: [registry],
  }),
};

/** Where the count of webhook_deliveries_pending stops: a scrape never reads more of the backlog than this. */
export const WEBHOOK_BACKLOG_COUNT_CAP = 10_000;

/** How long a scrape waits for the backlog's count before it answers without it (the primary of a cluster waits 5 s for each worker). */
export const WEBHOOK_BACKLOG_COUNT_WAIT_MS = 2000;

/**
 * Webhook deliveries not yet delivered nor given up, counted in the database when /metrics is
 * scraped, up to WEBHOOK_BACKLOG_COUNT_CAP (a scrape's cost stays the same however large the
 * backlog grows; the cap means "at least that many", past any sensible alert threshold): the
 * backlog every process shares, so a cluster reports the largest count, not the sum.
 *
 * When the database does not answer (within WEBHOOK_BACKLOG_COUNT_WAIT_MS), the gauge reads NaN
 * (not known) and the scrape answers all the same: an outage is when the other metrics — the
 * 503s, the pool's waiting requests — matter most, and a failing count once failed the whole
 * scrape. `onFailure` hears why (the server logs it).
 */
export function observeWebhookBacklog(count: (cap: number) => Promise<number>, onFailure: (err: unknown) => void = () => undefined): void {
  registry.removeSingleMetric('webhook_deliveries_pending');
  new Gauge({
    name: 'webhook_deliveries_pending',
    help: `Webhook deliveries waiting for their first attempt or a retry (all organizations), counted up to ${WEBHOOK_BACKLOG_COUNT_CAP}; NaN when the database did not answer`,
    aggregator: 'max',
    registers: [registry],
    async collect() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the backlog's count took longer than ${WEBHOOK_BACKLOG_COUNT_WAIT_MS} ms`)), WEBHOOK_BACKLOG_COUNT_WAIT_MS);
      });
      const counting = count(WEBHOOK_BACKLOG_COUNT_CAP);
      counting.catch(() => undefined); // a count that fails after the wait is not an unhandled rejection
      try {
        this.set(await Promise.race([counting, late]));
      } catch (err) {
        this.set(NaN);
        onFailure(err);
      } finally {
        clearTimeout(timer);
      }
    },
  });
}

/** Database pool use, read when /metrics is scraped. One pool per process. */
export function observeDatabasePool(db: Knex): void {
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number; max: number } }).pool;
  registry.removeSingleMetric('db_pool_connections');
  new Gauge({
    name: 'db_pool_connections',
    help: 'Database pool connections: used, free, pending (requests waiting for one) and max',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const p = (db.client as { pool?: typeof pool }).pool ?? pool;
      if (!p) return;
      this.set({ state: 'used' }, p.numUsed());
      this.set({ state: 'free' }, p.numFree());
      this.set({ state: 'pending' }, p.numPendingAcquires());
      this.set({ state: 'max' }, p.max);
    },
  });
}

/** The text of GET /metrics: this process's registry, or every worker's summed in a cluster. */
export async function metricsText(): Promise<string> {
  if (!cluster.isWorker || !process.send) return registry.metrics();
  const id = randomUUID();
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => { process.off('message', onMessage); reject(new Error('the primary process did not answer the metrics request')); }, 5000);
    const onMessage = (message: { type?: string; id?: string; text?: string; error?: string }) => {
      if (message?.type !== 'fop:metrics-reply' || message.id !== id) return;
      clearTimeout(timer);
      process.off('message', onMessage);
      if (message.error !== undefined) reject(new Error(message.error));
      else resolve(message.text ?? '');
    };
    process.on('message', onMessage);
    process.send!({ type: 'fop:metrics-request', id });
  });
}

type MetricsJson = Awaited<ReturnType<typeof registry.getMetricsAsJSON>>;

/**
 * In the primary of a cluster: answers a worker's metrics request with every worker's registry
 * combined (counters and histograms summed, gauges as each declares: summed, or the largest for
 * a shared count like webhook_deliveries_pending).
 *
 * A counter must never go down, or Prometheus reads a reset and counts the whole sum again as
 * new. So the counters and histograms of a worker that exits stay in the sums from then on, as
 * of the last time it was collected (what it counted after that is lost); its gauges go with it.
 */
export function serveClusterMetrics(): void {
  const latest = new Map<number, MetricsJson>();
  let retired: MetricsJson = [];
  let retiring = Promise.resolve();
  cluster.on('exit', (worker) => {
    const last = latest.get(worker.id);
    latest.delete(worker.id);
    const monotonic = (last ?? []).filter((metric) => ['counter', 'histogram'].includes(String(metric.type)));
    if (!monotonic.length) return;
    // in turn, so that two workers exiting together both stay counted
    retiring = retiring.then(async () => {
      retired = (await combine([retired, monotonic]).getMetricsAsJSON()) as MetricsJson;
    });
  });
  let next = 0;
  const waiting = new Map<string, (worker: number, reply: { metrics?: MetricsJson; error?: string }) => void>();
  cluster.on('message', (worker, message: { type?: string; id?: string; metrics?: MetricsJson; error?: string }) => {
    if (message?.type === 'fop:metrics-collected') {
      waiting.get(message.id ?? '')?.(worker.id, message);
      return;
    }
    if (message?.type !== 'fop:metrics-request') return;
    const id = String(next++);
    collect(id).then(
      (text) => worker.send({ type: 'fop:metrics-reply', id: message.id, text }),
      (err: Error) => worker.send({ type: 'fop:metrics-reply', id: message.id, error: err.message }),
    );
  });

  function collect(id: string): Promise<string> {
    const workers = Object.values(cluster.workers ?? {}).filter((w) => w?.isConnected());
    return new Promise<string>((resolve, reject) => {
      let pending = workers.length;
      const timer = setTimeout(() => finish(new Error('a worker did not send its metrics within 5 s')), 5000);
      function finish(err?: Error) {
        clearTimeout(timer);
        waiting.delete(id);
        if (err) return reject(err);
        // an error here must answer the scrape with it, never throw in the primary
        retiring.then(() => combine([...latest.values(), retired]).metrics()).then(resolve, reject);
      }
      waiting.set(id, (workerId, reply) => {
        if (reply.error !== undefined) return finish(new Error(reply.error));
        latest.set(workerId, withNaN(reply.metrics ?? []));
        if (--pending === 0) finish();
      });
      for (const w of workers) w!.send({ type: 'fop:metrics-collect', id });
      if (pending === 0) finish();
    });
  }
}

/**
 * A worker's metrics as it measured them: they come as JSON, in which NaN (a gauge that could not
 * be read, such as webhook_deliveries_pending during a database outage) arrives as null, and the
 * sums would read it as 0. Back as NaN, it stays NaN in any sum or largest value.
 */
function withNaN(metrics: MetricsJson): MetricsJson {
  return metrics.map((metric) => ({
    ...metric,
    values: (metric.values as { value: number | null }[]).map((v) => (v.value === null ? { ...v, value: NaN } : v)),
  })) as MetricsJson;
}

function combine(registries: MetricsJson[]) {
  return AggregatorRegistry.aggregate(registries as Parameters<typeof AggregatorRegistry.aggregate>[0]);
}

export const METRICS_CONTENT_TYPE = registry.contentType;

/**
 * Why a GET /metrics is refused (401), or undefined when it may be answered: with METRICS_TOKEN
 * set, only `Authorization: Bearer <METRICS_TOKEN>` may read the metrics. For every process that
 * serves them (runtime/http/publicRoutes.ts, runtime/webhooks/probeServer.ts).
 */
export function metricsAccessError(authorization: string | undefined, metricsToken: string | undefined): ApiError | undefined {
  if (metricsToken === undefined || bearerMatches(authorization, metricsToken)) return undefined;
  return unauthenticated('GET /metrics needs Authorization: Bearer <METRICS_TOKEN>');
}

/** Compares hashes so that the comparison takes the same time whatever the token's length. */
function bearerMatches(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer +(\S+)$/i.exec(authorization?.trim() ?? '');
  if (!match) return false;
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(match[1]), digest(token));
}
