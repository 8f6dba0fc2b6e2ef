// What V8's heap growing factor costs and saves: two servers, both started with `npm start`'s
// node options, one without its `--heap-growing-percent=100` (V8 then picks the factor by which
// the old generation may grow after each full GC itself, up to 4) and one with it (twice what
// survived) — or with the option given as the argument instead,
// each on a fresh SQLite file with rate limits off. Phases alternate between the two servers,
// 3 rounds: keyed POST /v1/logs (32 connections, 5 s), GET /v1/checkins/{id} (32 connections,
// 5 s) and the bench's ingest (8 connections, 500 new readings per request, fresh
// Idempotency-Key, 6 s). Prints each phase's req/s and server CPU per request (all threads, from
// /proc), and each server's peak RSS over the whole run.
// Usage: npm run build && node bench/micro/heapGrowth.cjs [extra node option instead of the one above]
'use strict';
const fs = require('node:fs');
const autocannon = require('autocannon');
const { startServer, NODE_OPTIONS, cpuMs, postLogs, ingestBatches } = require('./server.cjs');

const FLAG = process.argv[2] ?? '--heap-growing-percent=100';

async function prepare(label, nodeOptions, port) {
  const server = await startServer(nodeOptions, port);
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${server.secret}` };
  const checkin = await (await fetch(`http://127.0.0.1:${port}/v1/checkins`, {
    method: 'POST', headers, body: JSON.stringify({ userId: 'auth0|micro', siteId: 'site_micro', coordinates: { latitude: 52.5, longitude: 13.4 } }),
  })).json();
  const batch = await ingestBatches(port, headers);
  let peakKb = 0;
  const poll = setInterval(() => {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.pid}/status`, 'utf8'));
    if (m) peakKb = Math.max(peakKb, Number(m[1]));
  }, 100);
  let key = 0;
  const phases = {
    write: (seconds) => postLogs({ port, secret: server.secret, keyed: true, seconds }),
    read: (seconds) => autocannon({ url: `http://127.0.0.1:${port}/v1/checkins/${checkin.id}`, connections: 32, duration: seconds, headers }),
    ingest: (seconds) => autocannon({
      url: `http://127.0.0.1:${port}/v1/sensor-readings`, connections: 8, duration: seconds,
      requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, headers: { ...headers, 'idempotency-key': `heap-${port}-${key++}` }, body: batch() }) }],
    }),
  };
  return {
    label, phases, pid: server.pid,
    async stop() {
      clearInterval(poll);
      const hwmKb = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.pid}/status`, 'utf8'))[1]);
      await server.stop();
      return Math.max(peakKb, hwmKb) / 1024;
    },
  };
}

(async () => {
  const port = 39900 + Math.floor(Math.random() * 50) * 2;
  const without = NODE_OPTIONS.filter((option) => !option.startsWith('--heap-growing-percent'));
  const servers = [await prepare('V8 picks the factor', without, port), await prepare(FLAG, [...without, FLAG], port + 1)];
  for (const s of servers) for (const run of Object.values(s.phases)) await run(2); // warm-up
  const results = {};
  for (let round = 0; round < 3; round++) {
    for (const phase of ['write', 'read', 'ingest']) {
      for (const s of servers) {
        const before = cpuMs(s.pid);
        const r = await s.phases[phase](phase === 'ingest' ? 6 : 5);
        if (r.non2xx) throw new Error(`${s.label} ${phase}: ${r.non2xx} non-2xx answers`);
        const cpuUs = ((cpuMs(s.pid) - before) * 1000) / r.requests.total;
        (results[`${phase} ${s.label}`] ??= []).push(`${r.requests.average.toFixed(0)} req/s ${cpuUs.toFixed(0)} µs`);
      }
    }
  }
  for (const [name, rows] of Object.entries(results)) console.log(`${name.padEnd(40)} ${rows.join(' | ')}`);
  for (const s of servers) console.log(`${s.label.padEnd(40)} peak RSS ${(await s.stop()).toFixed(0)} MB`);
})();
