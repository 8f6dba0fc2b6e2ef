import { loadConfig, ConfigError } from './config';
import { openDatabase } from './storage/database';
import { migrateLatest } from './storage/migrate';
import { createApp } from './http/app';
import { ALL_SCOPES, countApiKeys, createApiKey, DEFAULT_ORGANIZATION } from './auth/apiKeys';
import pino from 'pino';

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

  if ((await countApiKeys(database.knex)) === 0) {
    const { key, secret } = await createApiKey(database.knex, { scopes: ALL_SCOPES, organization: DEFAULT_ORGANIZATION, name: 'bootstrap' });
    const base = `http://${config.host}:${config.port}`;
    process.stdout.write(
      `\nNo API key existed, so one was created with every scope in organization "${DEFAULT_ORGANIZATION}" (id ${key.id}).\n` +
        `It is shown only this once:\n\n  ${secret}\n\nTry it:\n\n  curl -s -H "Authorization: Bearer ${secret}" ${base}/v1/sites\n\n`,
    );
  }

  const { app, close } = createApp(config, { db: database.knex, logger });
  const server = app.listen(config.port, config.host, () => {
    logger.info({ address: `http://${config.host}:${config.port}`, database: database.dialect }, 'listening');
  });
  const shutdown = () => {
    close();
    server.close(() => database.close().then(() => process.exit(0)));
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
