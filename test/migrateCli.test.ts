import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import knex from 'knex';

/**
 * `npm run migrate` as an operator runs it (README, "Running on Postgres"): on a database that has
 * none of the schema it applies every migration, in order, and a second run changes nothing.
 * SQLite always (a new file); Postgres when TEST_DATABASE_URL is set (a new schema, dropped after).
 */
const run = promisify(execFile);
const ROOT = path.join(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const MIGRATIONS = fs.readdirSync(path.join(ROOT, 'runtime', 'storage', 'migrations')).filter((f) => /^\d{4}_.*\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, '')).sort();
const postgresUrl = process.env.TEST_DATABASE_URL;

async function migrate(databaseUrl: string): Promise<string> {
  const { stdout } = await run(TSX, ['scripts/migrate.ts'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl }, timeout: 60_000 });
  return stdout.trim();
}

describe('npm run migrate', () => {
  it('SQLite: applies every migration to a new file, then is up to date', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-migrate-'));
    try {
      const url = `sqlite://${path.join(dir, 'new.sqlite')}`;
      expect(await migrate(url)).toBe(`applied: ${MIGRATIONS.join(', ')}`);
      expect(await migrate(url)).toBe('already up to date');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  (postgresUrl ? it : it.skip)('Postgres: applies every migration to an empty schema, then is up to date', async () => {
    const schema = `m_${process.pid}_${randomBytes(4).toString('hex')}`;
    const admin = knex({ client: 'pg', connection: postgresUrl, pool: { min: 0, max: 1 } });
    await admin.raw('create schema ??', [schema]);
    try {
      const url = new URL(postgresUrl!);
      url.searchParams.set('options', `-c search_path=${schema}`);
      expect(await migrate(url.toString())).toBe(`applied: ${MIGRATIONS.join(', ')}`);
      expect(await migrate(url.toString())).toBe('already up to date');
      const tables = await admin('information_schema.tables').where({ table_schema: schema }).pluck('table_name');
      expect(tables).toEqual(expect.arrayContaining(['sites', 'events', 'webhook_deliveries', 'idempotency_keys']));
    } finally {
      await admin.raw('drop schema ?? cascade', [schema]);
      await admin.destroy();
    }
  }, 60_000);
});
