import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import pino, { type Logger } from 'pino';
import { Config, configOrExit } from '../config';
import { openDatabase, type Database } from '../storage/database';
import { schemaBehind } from '../storage/migrate';
import { observeDatabasePool } from '../observability/metrics';
import { DeliveryWorker, startDeliveryWorker } from './deliveryWorker';
import { EnginePhase, listenForProbes, ProbeServer } from './probeServer';

/**
 * `npm run worker`: the webhook delivery engine alone, without the HTTP API (run the API with
 * WEBHOOK_WORKER=off then, or not: any number of engines share the work). Same configuration as
 * the server. With WORKER_PORT it answers /healthz, /readyz and /metrics there
 * (probeServer.ts), from before it waits for the schema, so that /readyz says why it is not
 * ready yet. SIGTERM/SIGINT finish the attempts in flight, close that port, then exit 0.
 */
async function main(): Promise<void> {
  const config = configOrExit();
  const logger = pino({ level: config.logLevel });
  const database = openDatabase(config.databaseUrl, {
    queryTimeoutMs: config.databaseQueryTimeoutSeconds * 1000,
    // a keyed write's prepare step may wait for a webhook target inside its claim's transaction
    idleInTransactionMs: (config.webhookTimeoutSeconds + config.databaseQueryTimeoutSeconds) * 1000,
  });
  observeDatabasePool(database.knex); // this process's pool on its /metrics, as the API server's on its own
  let phase: EnginePhase = 'waiting';
  const probes = config.workerPort === undefined ? undefined : await listenOrExit(config, config.workerPort, database, logger, () => phase);

  let engine: DeliveryWorker | undefined;
  const schemaWait = new AbortController();
  const waited = waitForSchema(database.knex, logger, schemaWait.signal);
  const shutdown = (signal: NodeJS.Signals) => {
    if (phase === 'stopping') return;
    phase = 'stopping';
    const startedAt = Date.now();
    logger.info({ signal }, 'shutting down: finishing the webhook attempts in flight');
    schemaWait.abort();
    // the database closes only once nothing uses it: the schema's last look, the engine's attempts
    waited
      .catch(() => undefined) // main reports it
      .then(() => engine?.stop())
      .then(() => probes?.close())
      .then(() => database.close())
      .then(() => {
        logger.info({ durationMs: Date.now() - startedAt }, 'stopped');
        process.exit(0);
      }, (err: unknown) => {
        logger.error({ err }, 'shutdown could not finish: exiting');
        process.exit(1);
      });
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);

  if (!(await waited)) return; // stopped while waiting
  engine = startDeliveryWorker({ db: database.knex, settings: config, logger });
  phase = 'running';
  logger.info({ database: database.dialect }, 'webhook delivery worker started');
}

/** The probe listener, or — for a port in use — one line on stderr and exit 1, as `npm start` does. */
async function listenOrExit(config: Config, port: number, database: Database, logger: Logger, phase: () => EnginePhase): Promise<ProbeServer> {
  try {
    return await listenForProbes({ db: database.knex, host: config.host, port, metricsToken: config.metricsToken, requestTimeoutSeconds: config.requestTimeoutSeconds, logger, phase });
  } catch (err) {
    console.error(`Cannot listen on ${config.host}:${port}: ${(err as Error).message} (set WORKER_PORT or HOST)`);
    process.exit(1);
  }
}

/**
 * Waits for the schema this version needs (the servers or `npm run migrate` bring it), without
 * migrating itself: an engine restarted in the day must not start a migration meant for a window.
 * Resolves true once it is current, false when `signal` ends the wait first (a shutdown).
 */
async function waitForSchema(db: Knex, logger: Logger, signal: AbortSignal): Promise<boolean> {
  // each reason to wait is logged once, when it starts: the schema behind, or the database not
  // answering (/readyz says which meanwhile); the engine starts once neither holds
  let said: 'behind' | 'unreachable' | undefined;
  while (!signal.aborted) {
    const look = await schemaBehind(db).then(
      (message) => (message === undefined ? undefined : { reason: 'behind' as const, message }),
      (err: Error) => ({ reason: 'unreachable' as const, message: `the database cannot be reached (${err.message})` }),
    );
    // a shutdown during that look wins: the engine must not start on its way out
    if (!look) return !signal.aborted;
    if (said !== look.reason) logger.warn(`${look.message}; waiting`);
    said = look.reason;
    await sleep(SCHEMA_POLL_MS, undefined, { signal }).catch(() => undefined);
  }
  return false;
}

const SCHEMA_POLL_MS = 5000;

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
