import { loadConfig, ConfigError } from './config';
import { openDatabase } from './storage/database';
import { migrateLatest } from './storage/migrate';
import { createApp } from './http/app';
import { ALL_SCOPES, createApiKey, DEFAULT_ORGANIZATION } from './auth/apiKeys';
import { countApiKeys } from './storage/repositories/apiKeysRepository';
import pino from 'pino';
import { startDeliveryWorker } from './webhooks/deliveryWorker';

/** `npm start`: validate the configuration, migrate, create the first key if none exists, listen. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`Configuration error: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
  const logger = pino({ level: config.logLevel });
  const database = openDatabase(config.databaseUrl);
  await migrateLatest(database.knex);

  // first start: one key with every scope, shown once (docs/architecture.md, "Running and configuration")
  const bootstrap = (await countApiKeys(database.knex)) === 0
    ? await createApiKey(database.knex, { scopes: ALL_SCOPES, organization: DEFAULT_ORGANIZATION, name: 'bootstrap' })
    : undefined;

  const { app, close } = createApp(config, { db: database.knex, logger });
  const webhookWorker = config.webhookWorker ? startDeliveryWorker({ db: database.knex, settings: config, logger }) : undefined;
  const server = app.listen(config.port, config.host, () => {
    const address = server.address();
    const port = address && typeof address === 'object' ? address.port : config.port;
    if (bootstrap) {
      process.stdout.write(
        `\nNo API key existed, so one was created with every scope in organization "${DEFAULT_ORGANIZATION}" (id ${bootstrap.key.id}).\n` +
          `It is shown only this once:\n\n  ${bootstrap.secret}\n\nTry it:\n\n` +
          `  curl -s -H "Authorization: Bearer ${bootstrap.secret}" http://${config.host}:${port}/v1/sites\n\n`,
      );
    }
    logger.info({ address: `http://${config.host}:${port}`, database: database.dialect }, 'listening');
  });
  server.on('error', (err) => {
    console.error(`Cannot listen on ${config.host}:${config.port}: ${err.message} (set PORT or HOST)`);
    process.exit(1);
  });
  const shutdown = () => {
    close();
    server.close(() => Promise.resolve(webhookWorker?.stop()).then(() => database.close()).then(() => process.exit(0)));
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
