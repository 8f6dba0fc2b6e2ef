// The API server as a child process for the measurements in this folder: `node <nodeOptions>
// dist/runtime/main.js` on a fresh SQLite file — or, when MICRO_POSTGRES_URL is set, a fresh
// schema in that Postgres database — rate limits off, quiet logs. Resolves once it answers, with
// the first API key's secret (a new database creates one). spawnApi starts one on a given database.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { spawn, execFileSync } = require('node:child_process');
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
  const { server, secret } = await spawnApi({ nodeOptions, port, databaseUrl, env: { RATE_LIMIT_STORE: 'off' }, newDatabase: true });
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

/**
 * Starts `node <nodeOptions> dist/runtime/main.js` on `databaseUrl` with quiet logs and `env`, and
 * resolves once /healthz answers — with the first API key's secret when `newDatabase` (the
 * server prints it when it creates the database).
 */
async function spawnApi({ nodeOptions, port, databaseUrl, env = {}, newDatabase = false }) {
  const server = spawn(process.execPath, [...nodeOptions, ENTRY], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  server.stdout.on('data', (chunk) => { out += chunk; });
  let exited;
  server.once('exit', (code) => { exited = code; });
  const keyPrinted = () => /fop_[A-Za-z0-9_-]+/.test(out) && out.includes('curl');
  for (;;) {
    if (exited !== undefined) throw new Error(`server exited ${exited}`);
    const up = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
    if (up && (!newDatabase || keyPrinted())) return { server, secret: /fop_[A-Za-z0-9_-]+/.exec(out)?.[0] };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** node's options as `npm start` passes them (package.json), for every server these scripts start. */
const NODE_OPTIONS = require(path.join(__dirname, '..', '..', 'package.json')).scripts.start.split(' ').filter((w) => w.startsWith('--'));
const TICK_MS = 1000 / 100; // USER_HZ

/** A process's CPU time so far, all its threads (utime + stime from /proc), in ms. */
function cpuMs(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** One autocannon phase of POST /v1/logs at 32 connections, each request with a fresh Idempotency-Key when `keyed`. */
let sent = 0;
function postLogs({ port, secret, keyed, seconds }) {
  const autocannon = require('autocannon');
  return autocannon({
    url: `http://127.0.0.1:${port}/v1/logs`,
    connections: 32,
    duration: seconds,
    requests: [{
      method: 'POST',
      setupRequest: (req) => ({
        ...req,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}`, ...(keyed ? { 'idempotency-key': `cpu-${port}-${process.pid}-${sent}` } : {}) },
        body: JSON.stringify({ entityType: 'checkin', entityId: 'chk_x', message: `m${sent++}` }),
      }),
    }],
  });
}

/**
 * The bench's ingest load against one server: creates a site, then answers request bodies of 500
 * new readings each (1 000 sensors of that site, one reading per sensor per second), numbered on.
 */
async function ingestBatches(port, headers) {
  const site = await (await fetch(`http://127.0.0.1:${port}/v1/sites`, {
    method: 'POST', headers, body: JSON.stringify({ name: 'Ingest', latitude: 52.1, longitude: 5.1, radiusMeters: 100 }),
  })).json();
  let n = 0;
  return () => {
    let body = '{"readings":[';
    for (let i = 0; i < 500; i++) {
      const k = n++;
      body += `${i ? ',' : ''}{"provider":"bench","sensorExternalId":"s${k % 1000}","siteId":"${site.id}","metric":"temperature_c","value":${(k % 400) / 10},"unit":"C","occurredAt":"${new Date(1.7e12 + Math.floor(k / 1000) * 1000).toISOString()}"}`;
    }
    return `${body}]}`;
  };
}

/** On Postgres: the CPU time so far of the machine's postgres processes (its backends and helpers), in ms; 0 without any. */
function postgresMs() {
  let pids = [];
  try {
    pids = execFileSync('pgrep', ['-x', 'postgres']).toString().trim().split('\n').map(Number);
  } catch {
    return 0; // none (SQLite), or pgrep missing
  }
  return pids.reduce((sum, pid) => {
    try {
      return sum + cpuMs(pid);
    } catch {
      return sum; // ended meanwhile
    }
  }, 0);
}

module.exports = { startServer, spawnApi, NODE_OPTIONS, TICK_MS, cpuMs, postgresMs, postLogs, ingestBatches };
