/**
 * The framework floor: express 5 doing the scenario's database work with better-sqlite3
 * prepared statements and nothing else — no auth, no validation, no idempotency, no logging.
 * What the API does on top of this is the cost of its own pipeline.
 *
 *   GET  /v1/checkins/:id  one row by primary key → JSON
 *   POST /v1/logs          express.json() → one insert → 201 JSON
 *
 * Env: PORT, HOST, FLOOR_DB (SQLite file, migrated by the bench), FLOOR_ORG_ID, MAX_BODY_BYTES.
 */
import { randomBytes } from 'node:crypto';
import express from 'express';
import Database from 'better-sqlite3';

const db = new Database(process.env.FLOOR_DB!);
db.pragma('journal_mode = WAL');
db.pragma('busy_timeout = 5000');
db.pragma('foreign_keys = ON');
db.pragma('synchronous = NORMAL');
db.pragma('wal_autocheckpoint = 4000'); // the API's bound on the WAL (its checkpoints run on a thread)
const orgId = process.env.FLOOR_ORG_ID!;

const readCheckin = db.prepare('select * from checkins where org_id = ? and id = ?');
const insertLog = db.prepare(
  'insert into logs (id, org_id, entity_type, entity_id, entry_type, message, source, created_at) values (?, ?, ?, ?, ?, ?, ?, ?)',
);

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.get('/healthz', (_req, res) => {
  db.prepare('select 1').get();
  res.json({ status: 'ok' });
});
app.get('/v1/checkins/:id', (req, res) => {
  const row = readCheckin.get(orgId, req.params.id);
  if (!row) res.status(404).json({ code: 'NOT_FOUND' });
  else res.json(row);
});
app.post('/v1/logs', express.json({ limit: Number(process.env.MAX_BODY_BYTES ?? 1 << 20) }), (req, res) => {
  const body = req.body as { entityType: string; entityId: string; message: string; entryType?: string; source?: string };
  const log = {
    id: `log_${randomBytes(12).toString('hex')}`,
    entityType: body.entityType,
    entityId: body.entityId,
    entryType: body.entryType ?? 'comment',
    message: body.message,
    source: body.source ?? 'api',
    createdAt: new Date().toISOString(),
  };
  insertLog.run(log.id, orgId, log.entityType, log.entityId, log.entryType, log.message, log.source, log.createdAt);
  res.status(201).location(`/v1/logs/${log.id}`).json(log);
});

app.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
