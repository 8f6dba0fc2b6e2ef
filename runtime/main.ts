import cluster from 'node:cluster';
import pino, { Logger } from 'pino';
import { configOrExit, Config } from './config';
import { openDatabase } from './storage/database';
import { migrateLatest } from './storage/migrate';
import { createApp } from './http/app';
import { createHttpServer } from './http/httpServer';
import { ALL_SCOPES, createApiKey, DEFAULT_ORGANIZATION } from './auth/apiKeys';
import { countApiKeys } from './storage/repositories/apiKeysRepository';
import { startDeliveryWorker } from './webhooks/deliveryWorker';
import { BackgroundWork, exitGracefullyOnSignals } from './lifecycle/shutdown';
import { runPrimary } from './lifecycle/cluster';

/**
 * `npm start`: validate the configuration, migrate, create the first key if none exists (not
 * with NODE_ENV=production: the key CLI does), listen.
 * With WEB_CONCURRENCY > 1 this process does the first three and forks the workers that listen.
 */
async function main(): Promise<void> {
  const config = configOrExit();
  const logger = pino({ level: config.logLevel });
  process.on('SIGTERM', noteStop);
  process.on('SIGINT', noteStop);

  if (cluster.isWorker) return serve(config, logger);

  const announce = await prepareDatabase(config);
  stopIfSignalled(logger, announce);
  if (config.webConcurrency > 1) {
    handOverSignals();
    runPrimary({ workers: config.webConcurrency, logger, shutdownTimeoutSeconds: config.shutdownTimeoutSeconds, onFirstListening: announce });
    return;
  }
  return serve(config, logger, announce);
}

/**
 * SIGTERM or SIGINT while the process starts (migrating, waiting for Redis): noted, and the
 * process stops once the step under way has finished — a migration is never cut — with exit 0,
 * as a stop of a running server does. Before, the signal's default action ended it (exit 143).
 * A second signal stops it at once, exit 1: a step that does not finish (a migration waiting for
 * a lock another session holds) must not leave SIGKILL as the only way out.
 */
let stopSignal: NodeJS.Signals | undefined;
function noteStop(signal: NodeJS.Signals): void {
  if (stopSignal !== undefined) {
    console.error(`${signal} again while starting: stopping now, without waiting for the step under way`);
    process.exit(1);
  }
  stopSignal = signal;
}

/** `announce`: what the start has to show even when it serves nothing (the first key it created: the next start creates none). */
function stopIfSignalled(logger: Logger, announce?: (port: number | undefined) => void): void {
  if (stopSignal === undefined) return;
  announce?.(undefined);
  logger.info({ signal: stopSignal }, 'stopped while starting: nothing was served');
  process.exit(0);
}

/** From here on the server's own handlers (lifecycle/) take the signals. */
function handOverSignals(): void {
  process.off('SIGTERM', noteStop);
  process.off('SIGINT', noteStop);
}

/**
 * The schema tables are created in, as a Postgres URL's `options=-c search_path=…` names it: its
 * first entry that names a schema (`"$user"` names the role's own), if any.
 */
function schemaOf(url: string): string | undefined {
  try {
    const path = /search_path=(\S+)/.exec(new URL(url).searchParams.get('options') ?? '')?.[1];
    return path?.split(',').map((entry) => entry.trim()).find((entry) => entry !== '' && entry.replace(/"/g, '') !== '$user');
  } catch {
    return undefined;
  }
}

/**
 * Migrates and, on the first start, creates one key with every scope. Once
 * per start, in the process that forks the workers: the key is printed once, whatever
 * WEB_CONCURRENCY is. Returns what to print once the server listens.
 */
async function prepareDatabase(config: Config): Promise<(port: number | undefined) => void> {
  const database = openDatabase(config.databaseUrl);
  try {
    await migrateLatest(database.knex).catch((err: Error) => {
      const missing = /database .* does not exist/.test(err.message) ? ' (create it first, or fix DATABASE_URL)'
        // Postgres' words when the search_path of DATABASE_URL's options names no schema that exists
        : /no schema has been selected to create in/.test(err.message) ? ` (the schema DATABASE_URL's search_path names does not exist: create it first, \`create schema ${schemaOf(config.databaseUrl) ?? '…'}\`, or fix DATABASE_URL)`
        : '';
      throw new Error(`Cannot prepare the database of DATABASE_URL: ${err.message}${missing}`);
    });
    const noKey = (await countApiKeys(database.knex)) === 0;
    // in production a secret printed on stdout ends up in the log store: the operator creates the
    // first key with the key CLI instead, and is told so
    if (noKey && config.production) {
      return () => process.stderr.write(`No API key exists. Create the first one with: node dist/scripts/keys.js create --scopes all --org ${DEFAULT_ORGANIZATION} --name admin\n`);
    }
    const bootstrap = noKey ? await createApiKey(database.knex, { scopes: ALL_SCOPES, organization: DEFAULT_ORGANIZATION, name: 'bootstrap' }) : undefined;
    // `port` is where the server listens; undefined when it could not listen (the key was made
    // and stays valid, so it is still shown, without an address to try it on)
    return (port) => {
      if (!bootstrap) return;
      process.stdout.write(
        `\nNo API key existed, so one was created with every scope in organization "${DEFAULT_ORGANIZATION}" (id ${bootstrap.key.id}).\n` +
          `It is shown only this once:\n\n  ${bootstrap.secret}\n\n` +
          (port === undefined ? '' : `Try it:\n\n  curl -s -H "Authorization: Bearer ${bootstrap.secret}" http://${config.host}:${port}/v1/sites\n\n`),
      );
    };
  } finally {
    await database.close();
  }
}

/** Serves the API in this process until SIGTERM/SIGINT, then drains and exits. */
async function serve(config: Config, logger: Logger, announce?: (port: number | undefined) => void): Promise<void> {
  // a statement unanswered for DATABASE_QUERY_TIMEOUT_SECONDS gives its connection up (prepareDatabase's
  // handle, which migrates, has no such bound)
  const database = openDatabase(config.databaseUrl, {
    queryTimeoutMs: config.databaseQueryTimeoutSeconds * 1000,
    // a keyed write's prepare step may wait for a webhook target inside its claim's transaction
    idleInTransactionMs: (config.webhookTimeoutSeconds + config.databaseQueryTimeoutSeconds) * 1000,
  });
  const { app, ready, close } = createApp(config, { db: database.knex, logger });
  await ready();
  if (stopSignal !== undefined) {
    await close();
    await database.close();
    stopIfSignalled(logger, announce);
  }

  // Everything that runs beside the requests, stopped on shutdown before the database closes.
  // The webhook delivery engine finishes the attempts it has in flight (every process runs one
  // unless WEBHOOK_WORKER=off; they share the work through leases in the database).
  const webhookWorker = config.webhookWorker ? startDeliveryWorker({ db: database.knex, settings: config, logger }) : undefined;
  const background: BackgroundWork[] = [
    { name: 'purges and rate limiter', stop: close },
    ...(webhookWorker ? [{ name: 'webhook deliveries', stop: () => webhookWorker.stop() }] : []),
  ];

  const server = createHttpServer(app, config);
  server.listen(config.port, config.host, () => {
    const address = server.address();
    const port = address && typeof address === 'object' ? address.port : config.port;
    announce?.(port);
    logger.info({ address: `http://${config.host}:${port}`, database: database.dialect, ...(cluster.isWorker ? { worker: cluster.worker?.id } : {}) }, 'listening');
  });
  server.on('error', (err) => {
    if (!server.listening) announce?.(undefined);
    console.error(`Cannot listen on ${config.host}:${config.port}: ${err.message} (set PORT or HOST)`);
    process.exit(1);
  });
  exitGracefullyOnSignals({ server, logger, timeoutSeconds: config.shutdownTimeoutSeconds, background, closeDatabase: () => database.close() });
  handOverSignals();
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
