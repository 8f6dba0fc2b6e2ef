// Peak resident memory and throughput of the server under 32 concurrent keyed POST /v1/logs for
// 12 s, started with `node --max-semi-space-size=4` (npm start's young-generation option; its label
// says "npm start", from when that was npm start's only option) and without it (V8's default),
// each twice, alternating, on fresh SQLite files, rate limits off.
// Usage: npm run build && node bench/micro/semiSpace.cjs
'use strict';
const fs = require('node:fs');
const autocannon = require('autocannon');
const { startServer } = require('./server.cjs');

async function measure(label, nodeOptions, port) {
  const { pid, secret, stop } = await startServer(nodeOptions, port);
  let peakKb = 0;
  const poll = setInterval(() => {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (m) peakKb = Math.max(peakKb, Number(m[1]));
  }, 100);
  let n = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/v1/logs`,
    connections: 32,
    duration: 12,
    requests: [{
      method: 'POST',
      setupRequest: (req) => ({
        ...req,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}`, 'idempotency-key': `semi-${port}-${n++}` },
        body: JSON.stringify({ entityType: 'checkin', entityId: 'chk_x', message: `m${n}` }),
      }),
    }],
  });
  clearInterval(poll);
  const hwm = Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  await stop();
  console.log(`${label.padEnd(32)} ${result.requests.average.toFixed(0).padStart(5)} req/s, non-2xx ${result.non2xx}, peak RSS ${(Math.max(peakKb, hwm) / 1024).toFixed(0)} MB`);
}

(async () => {
  let port = 39100;
  for (let round = 0; round < 2; round++) {
    await measure('--max-semi-space-size=4 (npm start)', ['--max-semi-space-size=4'], port++);
    await measure("V8's default", [], port++);
  }
})();
