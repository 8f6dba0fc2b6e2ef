// What SQLite's commit-time checkpoint costs the thread that commits, and what the checkpoint
// thread (runtime/storage/sqliteCheckpoints.ts) leaves of it: 5 000 transactions shaped like a keyed
// log write with its event (log row, event row, completed Idempotency-Key row), each after 0.6 ms of
// busy work standing in for the rest of a request, on a fresh migrated file; prints the database
// time per write on the committing thread, its worst case and the WAL's size.
// Usage: npm run build && node bench/micro/checkpoints.cjs
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { randomBytes } = require('node:crypto');
const Database = require('better-sqlite3');
const DIST = path.join(__dirname, '..', '..', 'dist', 'runtime');
const { openDatabase } = require(path.join(DIST, 'storage', 'database.js'));
const { migrateLatest } = require(path.join(DIST, 'storage', 'migrate.js'));
const { createApiKey, ALL_SCOPES } = require(path.join(DIST, 'auth', 'apiKeys.js'));
const { startCheckpointer } = require(path.join(DIST, 'storage', 'sqliteCheckpoints.js'));

const busy = (us) => { const until = process.hrtime.bigint() + BigInt(us * 1000); while (process.hrtime.bigint() < until); };
const id = () => randomBytes(12).toString('hex');

async function template() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-checkpoints-'));
  const file = path.join(dir, 'template.sqlite');
  const db = openDatabase(`sqlite://${file}`);
  await migrateLatest(db.knex);
  const { key } = await createApiKey(db.knex, { scopes: ALL_SCOPES, name: 'checkpoints' });
  await db.knex.raw('pragma wal_checkpoint(TRUNCATE)');
  await db.close();
  return { dir, file, orgId: key.organizationId };
}

async function run(label, source, { thread, bound }) {
  const file = path.join(source.dir, `${label.replace(/\W+/g, '-')}.sqlite`);
  fs.copyFileSync(source.file, file);
  const db = new Database(file);
  for (const p of ['journal_mode = WAL', 'synchronous = NORMAL', 'foreign_keys = ON', `wal_autocheckpoint = ${bound}`]) db.pragma(p);
  const checkpointer = thread ? startCheckpointer(file) : undefined;
  const body = JSON.stringify({ id: `log_${id()}`, entityType: 'checkin', entityId: `chk_${id()}`, entryType: 'comment', message: 'bench message', source: 'api', createdAt: new Date().toISOString() });
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const log = db.prepare('insert into logs (created_at, entity_id, entity_type, entry_type, id, message, org_id, source) values (?, ?, ?, ?, ?, ?, ?, ?)');
  const event = db.prepare('insert into events (id, org_id, type, resource_id, data, changed_fields, occurred_at) values (?, ?, ?, ?, ?, ?, ?) returning seq');
  const answer = db.prepare(`insert into idempotency_keys (api_key_id, created_at, expires_at, fingerprint, idempotency_key, lock_token, locked_until,
    response_body, response_headers, response_status, state) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const N = 5000;
  let total = 0n;
  let worst = 0n;
  for (let i = 0; i < N; i++) {
    busy(600);
    const now = new Date().toISOString();
    const start = process.hrtime.bigint();
    begin.run();
    log.run(now, 'chk_x', 'checkin', 'comment', `log_${id()}`, 'bench message', source.orgId, 'api');
    event.all(`evt_${id()}`, source.orgId, 'log.created', `log_${id()}`, body, null, now);
    answer.run('key', now, now, 'f'.repeat(64), id(), null, null, body, '{}', 201, 'completed');
    commit.run();
    const spent = process.hrtime.bigint() - start;
    total += spent;
    if (spent > worst) worst = spent;
    if (i % 20 === 0) await new Promise((resolve) => setImmediate(resolve)); // let the thread's messages through
  }
  await checkpointer?.stop();
  const wal = fs.statSync(`${file}-wal`).size;
  db.close();
  console.log(`${label.padEnd(34)} ${(Number(total) / 1000 / N).toFixed(0).padStart(4)} µs per write on the committing thread, worst ${(Number(worst) / 1e6).toFixed(1)} ms, WAL ${(wal / 1e6).toFixed(1)} MB`);
}

(async () => {
  const source = await template();
  for (let round = 0; round < 2; round++) {
    await run('commit-time checkpoint at 1000', source, { thread: false, bound: 1000 });
    await run('commit-time checkpoint at 4000', source, { thread: false, bound: 4000 });
    await run('thread + bound at 4000 (the server)', source, { thread: true, bound: 4000 });
  }
  fs.rmSync(source.dir, { recursive: true, force: true });
})();
