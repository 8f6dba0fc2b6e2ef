// The API server as a child process for the measurements in this folder: `node <nodeOptions>
// dist/runtime/main.js` on a fresh SQLite file — or, when MICRO_POSTGRES_URL is set, a fresh
// schema in that Postgres database — rate limits off, quiet logs. Resolves once it printed its
// first API key (a new database creates one), with that key's secret.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { spawn } = require('node:child_process');
const ENTRY = path.join(__dirname, '..', '..', 'dist', 'runtime', 'main.js');

async function startServer(nodeOptions, port) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-micro-'));
  const postgres = process.env.MICRO_POSTGRES_URL;
  const schema = `micro_${process.pid}_${port}`;
  const admin = async (sql) => {
    const { Client } = require('pg');
    const client = new Client({ connectionString: postgres });
    await client.connect();
    try { await client.query(sql); } finally { await client.end(); }
  };
  if (postgres) await admin(`create schema "${schema}"`);
  const databaseUrl = postgres
    ? `${postgres}${postgres.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`
    : `sqlite://${path.join(dir, 'db.sqlite')}`;
  const server = spawn(process.execPath, [...nodeOptions, ENTRY], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'warn', RATE_LIMIT_STORE: 'off' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const secret = await new Promise((resolve, reject) => {
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /fop_[A-Za-z0-9_-]+/.exec(out);
      if (match && out.includes('curl')) resolve(match[0]);
    });
    server.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  return {
    pid: server.pid,
    secret,
    async stop() {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
      fs.rmSync(dir, { recursive: true, force: true });
      if (postgres) await admin(`drop schema if exists "${schema}" cascade`);
    },
  };
}

module.exports = { startServer };
