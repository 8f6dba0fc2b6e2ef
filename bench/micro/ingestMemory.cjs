// Peak resident memory of the server under the bench's ingest load — 8 connections, each request
// 500 new readings with a fresh Idempotency-Key, 20 s — with SQLite's group commit as shipped and
// without it (each write transaction commits as it leaves: ../lib/withoutGroupCommit.cjs), two
// rounds alternating, each on a fresh SQLite file, started as `npm start` starts it. Also the V8
// heap's peak size and Node's external memory, from the server's own /metrics (sampled every
// 0.5 s). The question: does holding the write transactions of a turn until one COMMIT raise the
// memory a server needs?
// Usage: npm run build && node bench/micro/ingestMemory.cjs
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const autocannon = require('autocannon');
const { startServer, NODE_OPTIONS, ingestBatches } = require('./server.cjs');
const WITHOUT_GROUP_COMMIT = path.join(__dirname, '..', 'lib', 'withoutGroupCommit.cjs');

async function measure(label, nodeOptions, port) {
  const { pid, secret, stop } = await startServer(nodeOptions, port);
  const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
  const batch = await ingestBatches(port, headers);
  let rssKb = 0;
  let heapBytes = 0;
  let externalBytes = 0;
  const rss = setInterval(() => {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (m) rssKb = Math.max(rssKb, Number(m[1]));
  }, 100);
  const metrics = setInterval(async () => {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`, { headers }).then((r) => r.text(), () => '');
    heapBytes = Math.max(heapBytes, Number(/^nodejs_heap_size_total_bytes (\d+)/m.exec(text)?.[1] ?? 0));
    externalBytes = Math.max(externalBytes, Number(/^nodejs_external_memory_bytes (\d+)/m.exec(text)?.[1] ?? 0));
  }, 500);
  let key = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/v1/sensor-readings`,
    connections: 8,
    duration: 20,
    requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, headers: { ...headers, 'idempotency-key': `ingest-${port}-${key++}` }, body: batch() }) }],
  });
  clearInterval(rss);
  clearInterval(metrics);
  const hwmKb = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  await stop();
  const mb = (bytes) => (bytes / 1048576).toFixed(0);
  console.log(`${label.padEnd(22)} ${result.requests.average.toFixed(1).padStart(5)} req/s, non-2xx ${result.non2xx}, peak RSS ${mb(Math.max(rssKb, hwmKb) * 1024)} MB, V8 heap peak ${mb(heapBytes)} MB, external peak ${mb(externalBytes)} MB`);
}

(async () => {
  let port = 39400 + Math.floor(Math.random() * 200);
  for (let round = 0; round < 2; round++) {
    await measure('group commit', NODE_OPTIONS, port++);
    await measure('without group commit', [...NODE_OPTIONS, '--require', WITHOUT_GROUP_COMMIT], port++);
  }
})();
