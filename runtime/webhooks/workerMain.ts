import pino from 'pino';
import { configOrExit } from '../config';
import { openDatabase } from '../storage/database';
import { schemaBehind } from '../storage/migrate';
import { startDeliveryWorker } from './deliveryWorker';

/**
 * `npm run worker`: the webhook delivery engine alone, without the HTTP API (run the API with
 * WEBHOOK_WORKER=off then, or not: any number of engines share the work). Same configuration as
 * the server. SIGTERM/SIGINT finish the attempts in flight, then exit 0.
 */
async function main(): Promise<void> {
  const config = configOrExit();
  const logger = pino({ level: config.logLevel });
  const database = openDatabase(config.databaseUrl);
  // waits for the schema this version needs (the servers or `npm run migrate` bring it), without
  // migrating itself: an engine restarted in the day must not start a migration meant for a window
  for (let said = false; ; said = true) {
    const behind = await schemaBehind(database.knex);
    if (!behind) break;
    if (!said) logger.warn(`${behind}; waiting`);
    await new Promise((resolve) => setTimeout(resolve, SCHEMA_POLL_MS));
  }
  const worker = startDeliveryWorker({ db: database.knex, settings: config, logger });
  logger.info({ database: database.dialect }, 'webhook delivery worker started');
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    worker.stop().then(() => database.close()).then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

const SCHEMA_POLL_MS = 5000;

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
