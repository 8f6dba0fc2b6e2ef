// Server CPU per POST /v1/logs, with a fresh Idempotency-Key and without one, measured on one
// server process (started as `npm start` starts it, fresh SQLite file, rate limits off) under
// 32 connections: phases of 6 s alternate between the two kinds, 4 rounds, and each phase's
// CPU time (all the process's threads, from /proc) is divided by its requests, and so is the
// whole machine's busy time (the database server's work included, on Postgres), and on Postgres
// the postgres processes' own CPU time. Steadier than
// the bench's req/s on a busy machine, because it counts the server's own work only.
// Usage: npm run build && node bench/micro/writeCpu.cjs (Postgres: MICRO_POSTGRES_URL=postgres://… in front)
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const { startServer, NODE_OPTIONS, TICK_MS, cpuMs, postgresMs, postLogs } = require('./server.cjs');

// the whole machine's busy time (all cores, from /proc/stat): on Postgres the database's own
// work per request counts as well (and the load generator's, alike for both kinds)
const machineMs = () => {
  const [, ...fields] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  const idle = fields[3] + fields[4]; // idle + iowait
  return (fields.reduce((a, b) => a + b, 0) - idle) * TICK_MS;
};

(async () => {
  const port = 39200 + Math.floor(Math.random() * 500);
  const { pid, secret, stop } = await startServer(NODE_OPTIONS, port);
  const run = (keyed, seconds) => postLogs({ port, secret, keyed, seconds });
  await run(true, 3); // warm-up
  const results = { keyed: [], plain: [] };
  for (let round = 0; round < 4; round++) {
    for (const keyed of [true, false]) {
      const before = cpuMs(pid);
      const machineBefore = machineMs();
      const postgresBefore = postgresMs();
      const r = await run(keyed, 6);
      const cpu = cpuMs(pid) - before;
      const machine = machineMs() - machineBefore;
      const postgres = postgresMs() - postgresBefore;
      if (r.non2xx) throw new Error(`${r.non2xx} non-2xx answers`);
      results[keyed ? 'keyed' : 'plain'].push({ perRequest: (cpu * 1000) / r.requests.total, machinePerRequest: (machine * 1000) / r.requests.total, postgresPerRequest: (postgres * 1000) / r.requests.total, rps: r.requests.average });
    }
  }
  await stop();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [kind, rows] of Object.entries(results)) {
    const postgres = process.env.MICRO_POSTGRES_URL ? `, ${median(rows.map((r) => r.postgresPerRequest)).toFixed(0)} µs Postgres CPU (${rows.map((r) => r.postgresPerRequest.toFixed(0)).join(', ')})` : '';
    console.log(`${kind === 'keyed' ? 'with a fresh Idempotency-Key' : 'without a key              '}  ${median(rows.map((r) => r.perRequest)).toFixed(0)} µs server CPU per request (${rows.map((r) => r.perRequest.toFixed(0)).join(', ')}), ${median(rows.map((r) => r.machinePerRequest)).toFixed(0)} µs machine CPU (${rows.map((r) => r.machinePerRequest.toFixed(0)).join(', ')})${postgres}, ${median(rows.map((r) => r.rps)).toFixed(0)} req/s (${rows.map((r) => r.rps.toFixed(0)).join(', ')})`);
  }
})();
