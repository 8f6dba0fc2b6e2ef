// Server CPU per GET /v1/checkins/{id} (the bench's read), measured on one server process
// (started as `npm start` starts it, fresh SQLite file, rate limits off, quiet logs) under 32
// connections: 4 phases of 6 s after a warm-up, each phase's CPU time (all the process's threads,
// from /proc) divided by its requests. Steadier than the bench's req/s on a busy machine, because
// it counts the server's own work only; for comparing two builds, run it in each, alternately.
// Usage: npm run build && node bench/micro/readCpu.cjs (Postgres: MICRO_POSTGRES_URL=postgres://… in front)
'use strict';
const autocannon = require('autocannon');
const { startServer, NODE_OPTIONS, cpuMs } = require('./server.cjs');

(async () => {
  const port = 39700 + Math.floor(Math.random() * 500);
  const { pid, secret, stop } = await startServer(NODE_OPTIONS, port);
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${secret}` };
  const created = await fetch(`http://127.0.0.1:${port}/v1/checkins`, {
    method: 'POST', headers, body: JSON.stringify({ userId: 'auth0|micro', siteId: 'site_micro', coordinates: { latitude: 52.5, longitude: 13.4 } }),
  });
  if (created.status !== 201) throw new Error(`creating the check-in answered ${created.status}`);
  const { id } = await created.json();
  const run = (seconds) => autocannon({ url: `http://127.0.0.1:${port}/v1/checkins/${id}`, connections: 32, duration: seconds, headers });
  await run(3); // warm-up
  const rows = [];
  for (let round = 0; round < 4; round++) {
    const before = cpuMs(pid);
    const r = await run(6);
    const cpu = cpuMs(pid) - before;
    if (r.non2xx) throw new Error(`${r.non2xx} non-2xx answers`);
    rows.push({ perRequest: (cpu * 1000) / r.requests.total, rps: r.requests.average, p99: r.latency.p99 });
  }
  await stop();
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`read  ${median(rows.map((r) => r.perRequest)).toFixed(0)} µs server CPU per request (${rows.map((r) => r.perRequest.toFixed(0)).join(', ')}), ` +
    `${median(rows.map((r) => r.rps)).toFixed(0)} req/s, p99 ${median(rows.map((r) => r.p99)).toFixed(1)} ms`);
})();
