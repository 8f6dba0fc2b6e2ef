// What recording events costs a server, the way the bench's write scenario compares it but with
// nothing else running: two API servers on one fresh SQLite file, the second with recordEvent a
// no-op (../lib/withoutEvents.cjs), both started as `npm start` starts them (memory rate limits far
// above the load, quiet logs); 5-second phases of keyed (see UNKEYED) POST /v1/logs (32 connections) alternate
// between them, 6 rounds; each phase's req/s and the server's CPU per request (all its threads,
// from /proc). Prints every phase and the medians of the per-round ratios.
// Usage: npm run build && node bench/micro/eventsServers.cjs
// ROUNDS=8 runs 8 rounds instead of 6; DROP='drop index …;…' runs statements on the shared file
// before the load (both servers then serve the changed schema).
// CPU_PROF_DIR=dir adds `--cpu-prof` to both servers (profiles in dir/with and dir/without; compare
// them with `node bench/micro/profileDiff.cjs dir/with/<main thread's file> dir/without/<…>`).
// UNKEYED=1 sends the writes without an Idempotency-Key. THREADS=1 also prints each server's CPU
// per request over all rounds, user and system, for its main thread and for its other threads
// together (from /proc/<pid>/task). IO=1 prints each server's writes per request over all rounds:
// write calls and bytes (from /proc/<pid>/io: the WAL's frames, the checkpoint's copies into the
// database file, and the HTTP answers).
// MICRO_POSTGRES_URL=postgres://… runs both servers on a fresh schema of that Postgres database
// instead, and prints the postgres processes' CPU per request of each phase too. PRELOAD=file
// preloads a module into the server with events (to try a change there without a build).
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { spawnApi, NODE_OPTIONS, TICK_MS, cpuMs, postgresMs, postLogs } = require('./server.cjs');
const WITHOUT_EVENTS = path.join(__dirname, '..', 'lib', 'withoutEvents.cjs');
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const LIMITS = { RATE_LIMIT_STORE: 'memory', RATE_LIMIT_PER_MINUTE: '10000000' };
const KEYED = !process.env.UNKEYED;

/** A process's CPU time so far in ms, user and system, of its main thread and of its other threads together. */
function threadCpuMs(pid) {
  const out = { main: { user: 0, system: 0 }, others: { user: 0, system: 0 } };
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let fields;
    try { fields = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' '); } catch { continue; } // the thread ended
    const into = tid === String(pid) ? out.main : out.others;
    into.user += Number(fields[11]) * TICK_MS;
    into.system += Number(fields[12]) * TICK_MS;
  }
  return out;
}

/** A process's write calls and bytes written so far (all its threads, files and sockets). */
function writesOf(pid) {
  const io = Object.fromEntries(fs.readFileSync(`/proc/${pid}/io`, 'utf8').trim().split('\n').map((line) => line.split(': ')));
  return { calls: Number(io.syscw), bytes: Number(io.wchar) };
}

/** Runs one statement on its own connection. */
async function adminQuery(url, sql) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  try { await client.query(sql); } finally { await client.end(); }
}

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-events-servers-'));
  const file = path.join(dir, 'db.sqlite');
  const port = 40100 + Math.floor(Math.random() * 400);
  const postgres = process.env.MICRO_POSTGRES_URL;
  const schema = `events_servers_${process.pid}`;
  if (postgres) await adminQuery(postgres, `create schema "${schema}"`);
  const databaseUrl = postgres
    ? `${postgres}${postgres.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`
    : `sqlite://${file}`;
  const profile = (name) => (process.env.CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${path.join(process.env.CPU_PROF_DIR, name)}`] : []);
  const preload = process.env.PRELOAD ? ['--require', path.resolve(process.env.PRELOAD)] : [];
  const withEvents = await spawnApi({ nodeOptions: [...NODE_OPTIONS, ...profile('with'), ...preload], port, databaseUrl, env: LIMITS, newDatabase: true });
  // DROP='statement;…' changes the schema of the shared file before the load (to try a schema change)
  if (process.env.DROP && postgres) {
    for (const statement of process.env.DROP.split(';').filter(Boolean)) await adminQuery(databaseUrl, statement);
  } else if (process.env.DROP) {
    const db = new (require('better-sqlite3'))(file);
    for (const statement of process.env.DROP.split(';').filter(Boolean)) db.exec(statement);
    db.close();
  }
  const without = await spawnApi({ nodeOptions: [...NODE_OPTIONS, ...profile('without'), '--require', WITHOUT_EVENTS], port: port + 1, databaseUrl, env: LIMITS });
  const run = (p, seconds) => postLogs({ port: p, secret: withEvents.secret, keyed: KEYED, seconds });
  await run(port, 3);
  await run(port + 1, 3);
  const ratios = { rps: [], cpu: [] };
  const threads = { 'with events': { requests: 0, main: { user: 0, system: 0 }, others: { user: 0, system: 0 } }, 'without events': { requests: 0, main: { user: 0, system: 0 }, others: { user: 0, system: 0 } } };
  const writes = { 'with events': { calls: 0, bytes: 0 }, 'without events': { calls: 0, bytes: 0 } };
  for (let round = 0; round < ROUNDS; round++) {
    const phase = {};
    for (const [name, p, proc] of [['with events', port, withEvents.server], ['without events', port + 1, without.server]]) {
      const before = cpuMs(proc.pid);
      const threadsBefore = threadCpuMs(proc.pid);
      const writesBefore = writesOf(proc.pid);
      const postgresBefore = postgres ? postgresMs() : 0;
      const r = await run(p, 5);
      const postgresCpu = postgres ? ((postgresMs() - postgresBefore) * 1000) / r.requests.total : undefined;
      const threadsAfter = threadCpuMs(proc.pid);
      threads[name].requests += r.requests.total;
      const writesAfter = writesOf(proc.pid);
      for (const kind of ['calls', 'bytes']) writes[name][kind] += writesAfter[kind] - writesBefore[kind];
      for (const part of ['main', 'others']) for (const kind of ['user', 'system']) threads[name][part][kind] += threadsAfter[part][kind] - threadsBefore[part][kind];
      if (r.non2xx) throw new Error(`${r.non2xx} non-2xx answers`);
      phase[name] = { rps: r.requests.average, cpu: ((cpuMs(proc.pid) - before) * 1000) / r.requests.total };
      console.log(`round ${round + 1} ${name.padEnd(14)} ${phase[name].rps.toFixed(0)} req/s, ${phase[name].cpu.toFixed(0)} µs server CPU per request${postgres ? `, ${postgresCpu.toFixed(0)} µs Postgres CPU` : ''}`);
    }
    ratios.rps.push(phase['with events'].rps / phase['without events'].rps);
    ratios.cpu.push(phase['without events'].cpu / phase['with events'].cpu);
  }
  for (const { server } of [withEvents, without]) {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
  }
  fs.rmSync(dir, { recursive: true, force: true });
  if (postgres) await adminQuery(postgres, `drop schema if exists "${schema}" cascade`);
  if (process.env.THREADS) {
    for (const [name, t] of Object.entries(threads)) {
      const per = (ms) => ((ms * 1000) / t.requests).toFixed(1);
      console.log(`${name}: main thread ${per(t.main.user)} + ${per(t.main.system)} µs, other threads ${per(t.others.user)} + ${per(t.others.system)} µs CPU per request (user + system)`);
    }
  }
  if (process.env.IO) {
    for (const [name, w] of Object.entries(writes)) {
      const requests = threads[name].requests;
      console.log(`${name}: ${(w.calls / requests).toFixed(2)} write calls and ${(w.bytes / requests / 1024).toFixed(1)} KB written per request`);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`with events ÷ without: throughput ${median(ratios.rps).toFixed(2)} (rounds ${ratios.rps.map((x) => x.toFixed(2)).join(', ')}), CPU-time ratio ${median(ratios.cpu).toFixed(2)}`);
})();
