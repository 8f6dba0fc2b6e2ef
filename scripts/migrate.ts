/** `npm run migrate`: applies pending migrations to DATABASE_URL (npm start does this too). */
import { configOrExit } from '../runtime/config';
import { openDatabase } from '../runtime/storage/database';
import { migrateLatest } from '../runtime/storage/migrate';

async function main(): Promise<void> {
  // a bad setting: one line and exit 2, as for the server
  const database = openDatabase(configOrExit().databaseUrl);
  try {
    const applied = await migrateLatest(database.knex);
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'already up to date');
  } finally {
    await database.close();
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
