import fs from 'node:fs';
import path from 'node:path';
import { Knex } from 'knex';

interface MigrationModule {
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

const MIGRATION_FILE = /^\d{4}_[a-z0-9_]+\.(ts|js)$/;

/**
 * The migrations in `dir` by name, in order. A TypeScript or JavaScript file there that is not
 * named like one (`0017_deliveries_by_event.ts`: four digits, then lower-case words) is refused
 * with its name: skipped, its change would silently never be made.
 *
 * Run from the compiled `dist/` (npm start), the names are those of the sources the build compiled
 * (`runtime/storage/migrations/` beside `dist/`, when present), each of which must have its
 * compiled file: an incremental build never deletes, so a migration renamed or removed in the
 * sources leaves its old compiled file behind, which would otherwise run (or be refused) too.
 */
export function migrationNames(dir: string): string[] {
  const sources = sourcesOf(dir);
  const names = namesIn(sources ?? dir);
  if (sources) {
    const unbuilt = names.filter((name) => !fs.existsSync(path.join(dir, `${name}.js`)));
    if (unbuilt.length) throw new Error(`${unbuilt.join(', ')} in ${sources} not compiled into ${dir}: run npm run build`);
  }
  return names;
}

function namesIn(dir: string): string[] {
  const files = fs.readdirSync(dir).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'));
  const misnamed = files.filter((f) => !MIGRATION_FILE.test(f));
  if (misnamed.length) throw new Error(`${misnamed.join(', ')} in ${dir}: name a migration <4 digits>_<lower_case_words>.ts, e.g. 0017_deliveries_by_event.ts`);
  return files.map((f) => f.replace(/\.(ts|js)$/, '')).sort();
}

/** The source folder `dir` was compiled from, when `dir` is under dist/ and the sources are there. */
function sourcesOf(dir: string): string | undefined {
  const parts = path.resolve(dir).split(path.sep);
  const at = parts.lastIndexOf('dist');
  if (at < 0) return undefined;
  const sources = [...parts.slice(0, at), ...parts.slice(at + 1)].join(path.sep);
  return fs.existsSync(sources) ? sources : undefined;
}

/**
 * Forward-only, numbered migrations (`migrations/0001_name.ts`), the same files for SQLite and
 * Postgres. Read from the folder so that adding one needs no other edit; the same code runs
 * from TypeScript (tests, scripts) and from the compiled dist/ (npm start).
 */
const migrationSource: Knex.MigrationSource<string> = {
  async getMigrations() {
    return migrationNames(MIGRATIONS_DIR);
  },
  getMigrationName: (name) => name,
  async getMigration(name) {
    const mod: MigrationModule = require(path.join(MIGRATIONS_DIR, name));
    return { up: mod.up, down: mod.down ?? (async () => { throw new Error('migrations are forward-only'); }) };
  },
};

/** Applies every pending migration; safe to run concurrently from several processes (Knex takes a lock). */
export async function migrateLatest(db: Knex): Promise<string[]> {
  const [, applied] = await db.migrate.latest({ migrationSource });
  return applied as string[];
}

/** Names of the migrations this code knows that the database has not applied yet. */
export async function pendingMigrations(db: Knex): Promise<string[]> {
  const [, pending] = await db.migrate.list({ migrationSource });
  return (pending as { file?: string }[]).map((m) => (typeof m === 'string' ? m : String(m.file ?? m)));
}

/**
 * The message for a process that needs the schema current and does not migrate it (the key CLI,
 * a separate delivery engine), or undefined when nothing is pending. Only the server (on start)
 * and `npm run migrate` migrate: a migration may rewrite a large table under a lock, which an
 * operator runs when they choose, not whenever a key is listed.
 */
export async function schemaBehind(db: Knex): Promise<string | undefined> {
  const pending = await pendingMigrations(db);
  if (!pending.length) return undefined;
  return `the database's schema is behind this version (${pending.length} migration${pending.length === 1 ? '' : 's'} pending, from ${pending[0]}): run npm run migrate, or start the server, first`;
}

/**
 * Applies pending migrations one at a time up to and including `name`: for checking one
 * migration against the schema and data of the one before it (its tests), never for serving.
 */
export async function migrateUpTo(db: Knex, name: string): Promise<void> {
  const names = await migrationSource.getMigrations([]);
  if (!names.includes(name)) throw new Error(`no migration named ${name}`);
  while (!(await pendingMigrations(db)).every((pending) => pending > name)) {
    await db.migrate.up({ migrationSource });
  }
}
