// What an event adds to a SQLite commit, measured on the database alone (no HTTP, no Knex): a
// fresh file migrated by the server's own migrations, then batches of 16 write transactions shaped
// like the group commit's (runtime/storage/sqliteGroupCommit.ts: one BEGIN IMMEDIATE, each write
// in a savepoint of its own, one COMMIT), each write a log row, with or without its event row.
// Prints the CPU per write and the WAL pages each batch's commit wrote, with and without events,
// for the schema as migrated and for variants given as JSON (statements run on the fresh file):
//   npm run build && node bench/micro/eventPages.cjs
//   node bench/micro/eventPages.cjs '[{"name":"-type index","sql":["drop index events_org_id_type_seq_index"]}]'
//   node bench/micro/eventPages.cjs '[{"name":"returning seq","returning":true}]'   (the insert as it was)
// BATCH=4 makes batches of 4 writes instead of 16.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const Database = require('better-sqlite3');
const DIST = path.join(__dirname, '..', '..', 'dist', 'runtime');
const { openDatabase } = require(path.join(DIST, 'storage', 'database.js'));
const { migrateLatest } = require(path.join(DIST, 'storage', 'migrate.js'));

const BATCH = Number(process.env.BATCH ?? 16);
const PAGE_FRAME = 4096 + 24; // a WAL frame: the page and its header

async function migratedFile(dir) {
  const file = path.join(dir, 'template.sqlite');
  const db = openDatabase(`sqlite://${file}`);
  await migrateLatest(db.knex);
  await db.knex('organizations').insert({ id: 'org_eventpages00000000000000', name: 'event pages', created_at: new Date().toISOString() });
  await db.close();
  return file;
}

function measure(template, dir, variant) {
  const file = path.join(dir, `${variant.name.replace(/\W+/g, '_')}.sqlite`);
  fs.copyFileSync(template, file);
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('temp_store = MEMORY');
  db.pragma('wal_autocheckpoint = 0'); // the WAL's growth is the measurement
  for (const sql of variant.sql ?? []) db.exec(sql);
  const org = 'org_eventpages00000000000000';
  const insertLog = db.prepare(`insert into logs (id, org_id, entity_type, entity_id, entry_type, message, source, created_at)
    values (?, ?, 'checkin', 'chk_abcdefghjkmnpqrstvwxyz01', 'comment', 'bench message', 'api', ?) returning seq`);
  // as the server inserts it (storage/repositories/eventsRepository.ts), or with the `returning seq`
  // it had before (a variant's `"returning": true`)
  const insertEvent = db.prepare(`insert into events (id, org_id, type, resource_id, data, changed_fields, occurred_at)
    values (?, ?, 'log.created', ?, ?, null, ?)${variant.returning ? ' returning seq' : ''}`);
  let n = 0;
  const id = (prefix) => `${prefix}_${String(Date.now() * 1000 + ++n).padStart(24, '0')}`; // time-ordered, as the server's
  const batch = (events) => {
    db.exec('BEGIN IMMEDIATE');
    for (let i = 0; i < BATCH; i++) {
      db.exec('SAVEPOINT write_member');
      const logId = id('log');
      const at = new Date().toISOString();
      insertLog.get(logId, org, at);
      if (events) {
        const data = JSON.stringify({ id: logId, entityType: 'checkin', entityId: 'chk_abcdefghjkmnpqrstvwxyz01', entryType: 'comment', message: 'bench message', source: 'api', createdAt: at });
        if (variant.returning) insertEvent.get(id('evt'), org, logId, data, at);
        else insertEvent.run(id('evt'), org, logId, data, at);
      }
      db.exec('RELEASE write_member');
    }
    db.exec('COMMIT');
  };
  for (let i = 0; i < 2000; i++) batch(true); // tables of some size
  db.pragma('wal_checkpoint(TRUNCATE)');
  const rounds = { true: [], false: [] };
  for (const events of [true, false, true, false]) {
    const walBefore = fs.statSync(`${file}-wal`).size;
    const cpu = process.cpuUsage();
    for (let i = 0; i < 500; i++) batch(events);
    const used = process.cpuUsage(cpu);
    const pages = (fs.statSync(`${file}-wal`).size - walBefore) / PAGE_FRAME / 500;
    rounds[events].push(`${((used.user + used.system) / (500 * BATCH)).toFixed(1)} µs/write ${pages.toFixed(1)} pages/commit`);
    db.pragma('wal_checkpoint(TRUNCATE)');
  }
  db.close();
  console.log(`${variant.name.padEnd(16)} with events: ${rounds.true.join(', ')}; without: ${rounds.false.join(', ')}`);
}

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-event-pages-'));
  try {
    const template = await migratedFile(dir);
    const variants = [{ name: 'as migrated' }, ...JSON.parse(process.argv[2] ?? '[]')];
    for (const variant of variants) measure(template, dir, variant);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
})();
