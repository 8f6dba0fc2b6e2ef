// Where one `node --cpu-prof` profile spent more time than another over the same work: self time
// per function (name, file, line) in each, and the difference, largest first; the busy time of
// each (all but idle) on the first line. For two servers that ran the same phases, e.g. the two of
// `CPU_PROF_DIR=… node bench/micro/eventsServers.cjs` (the main thread's profile is the largest file).
// Usage: node bench/micro/profileDiff.cjs a.cpuprofile b.cpuprofile [--top=40]
'use strict';
const fs = require('node:fs');

function selfTimes(file) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const ms = new Map();
  profile.samples.forEach((id, i) => {
    const { functionName, url, lineNumber } = nodes.get(id).callFrame;
    const key = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber}`;
    ms.set(key, (ms.get(key) ?? 0) + profile.timeDeltas[i] / 1000);
  });
  return ms;
}

const [fileA, fileB] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const top = Number(process.argv.find((a) => a.startsWith('--top='))?.slice(6) ?? 40);
const a = selfTimes(fileA);
const b = selfTimes(fileB);
const busy = (m) => [...m].filter(([k]) => !k.startsWith('(idle)')).reduce((sum, [, v]) => sum + v, 0);
console.log(`busy ms: ${busy(a).toFixed(0)} (first) vs ${busy(b).toFixed(0)} (second)`);
console.log('  first−second    first   second  function');
const rows = [...new Set([...a.keys(), ...b.keys()])].map((k) => [k, a.get(k) ?? 0, b.get(k) ?? 0]).sort((x, y) => (y[1] - y[2]) - (x[1] - x[2]));
for (const [key, x, y] of rows.slice(0, top)) console.log(`${(x - y).toFixed(0).padStart(13)} ${x.toFixed(0).padStart(8)} ${y.toFixed(0).padStart(8)}  ${key}`);
