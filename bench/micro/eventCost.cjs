// The CPU cost of recording an event, in-process (no HTTP, no other process): `createLog` in its
// write transaction through the compiled modules (dist/), alternating 8 × 4 000 writes with
// `recordEvent` and with a no-op in its place, on a fresh SQLite file; prints the median of the
// per-round differences. Usage: npm run build && node bench/micro/eventCost.cjs
// DROP='drop index …' runs statements on the fresh database first (to try a schema change).
// WRITERS=16 runs the writes as 16 concurrent writers instead of one after the other: on SQLite
// the write transactions of one turn of the event loop then commit together, 16 at a time
// (runtime/storage/sqliteGroupCommit.ts), where one writer commits each write on its own.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const DIST = path.join(__dirname, '..', '..', 'dist', 'runtime');
const { openDatabase } = require(path.join(DIST, 'storage', 'database.js'));
const { migrateLatest } = require(path.join(DIST, 'storage', 'migrate.js'));
const { createApiKey, ALL_SCOPES } = require(path.join(DIST, 'auth', 'apiKeys.js'));
const { inWriteTransaction } = require(path.join(DIST, 'storage', 'writeTransaction.js'));
const events = require(path.join(DIST, 'domain', 'events.js'));
const logs = require(path.join(DIST, 'domain', 'logs.js'));

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-event-cost-'));
  const db = openDatabase(`sqlite://${path.join(dir, 'bench.sqlite')}`);
  await migrateLatest(db.knex);
  for (const statement of (process.env.DROP ?? '').split(';').filter(Boolean)) await db.knex.raw(statement);
  const { key } = await createApiKey(db.knex, { scopes: ALL_SCOPES, name: 'event-cost' });
  const body = { entityType: 'checkin', entityId: 'chk_abcdefghjkmnpqrstvwxyz01', entryType: 'comment', message: 'bench message', source: 'api' };
  const writers = Number(process.env.WRITERS ?? 1);
  const writer = async (n) => { for (let i = 0; i < n; i++) await inWriteTransaction(db.knex, (trx) => logs.createLog(trx, key.organizationId, body)); };
  const write = (n) => Promise.all(Array.from({ length: writers }, () => writer(Math.ceil(n / writers))));
  const recordEvent = events.recordEvent;
  await write(20000); // a table of some size, warm code
  const rounds = [];
  for (let round = 0; round < 8; round++) {
    const cpu = {};
    for (const withEvents of [true, false]) {
      events.recordEvent = withEvents ? recordEvent : async () => undefined;
      const start = process.cpuUsage();
      await write(4000);
      const used = process.cpuUsage(start);
      cpu[withEvents] = (used.user + used.system) / 4000; // all threads: the checkpoint thread too
    }
    rounds.push({ with: cpu.true, without: cpu.false, event: cpu.true - cpu.false });
  }
  rounds.sort((a, b) => a.event - b.event);
  const mid = rounds[4];
  console.log(`event: ${mid.event.toFixed(1)} µs CPU per write (median of 8; range ${rounds[0].event.toFixed(0)}–${rounds[7].event.toFixed(0)}); ` +
    `write with event ${mid.with.toFixed(0)} µs, without ${mid.without.toFixed(0)} µs`);
  await db.close();
  fs.rmSync(dir, { recursive: true, force: true });
})();
