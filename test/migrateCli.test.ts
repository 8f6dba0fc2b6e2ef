import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import knex from 'knex';
import { runScript } from './support/scripts';
import { withSearchPath } from './support/databases';

/**
 * `npm run migrate` as an operator runs it (README, "Running on Postgres"): on a database that has
 * none of the schema it applies every migration, in order, and a second run changes nothing.
 * SQLite always (a new file); Postgres when TEST_DATABASE_URL is set (a new schema, dropped after).
 */
const ROOT = path.join(__dirname, '..');
const MIGRATIONS = fs.readdirSync(path.join(ROOT, 'runtime', 'storage', 'migrations')).filter((f) => /^\d{4}_.*\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, '')).sort();
const postgresUrl = process.env.TEST_DATABASE_URL;

async function migrate(databaseUrl: string): Promise<string> {
  const { code, stdout, stderr } = await runScript('migrate.ts', [], databaseUrl, 60_000);
  if (code !== 0) throw new Error(`npm run migrate exited ${code}: ${stderr}`);
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
      const url = withSearchPath(postgresUrl!, schema);
      expect(await migrate(url)).toBe(`applied: ${MIGRATIONS.join(', ')}`);
      expect(await migrate(url)).toBe('already up to date');
      const tables = await admin('information_schema.tables').where({ table_schema: schema }).pluck('table_name');
      expect(tables).toEqual(expect.arrayContaining(['sites', 'events', 'webhook_deliveries', 'idempotency_keys']));
    } finally {
      await admin.raw('drop schema ?? cascade', [schema]);
      await admin.destroy();
    }
  }, 60_000);
});
