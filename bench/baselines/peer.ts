/**
 * The peer: the scenario's two operations built the way a team would build them without our
 * contract-first pipeline — express 5, express-openapi-validator validating every request
 * against our own generated/openapi.json, Knex for every statement (its default setup: no
 * statement cache), and the API key looked up by its hash on every request. It serves the
 * API's own database (same SQLite file, or the same Postgres schema), so key, rows and
 * indexes are exactly the API's.
 *
 *   GET  /v1/checkins/:id  key → row by (org, id) → the Checkin JSON
 *   POST /v1/logs          key → validated body → one insert → 201 Log JSON + Location
 *
 * It does what a careful first version does and no more: no idempotency, no request log.
 *
 * Env: PORT, HOST, PEER_DATABASE_URL (`sqlite:/abs/file` or `postgres://…`), MAX_BODY_BYTES.
 */
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import express, { NextFunction, Request, Response } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import knex, { Knex } from 'knex';

const url = process.env.PEER_DATABASE_URL!;
const db: Knex = url.startsWith('sqlite:')
  ? knex({
      client: 'better-sqlite3',
      connection: { filename: url.slice('sqlite:'.length).replace(/^\/\//, '') },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: 1,
        // the same pragmas as the API, so both pay the same per commit
        afterCreate(conn: any, done: (err: Error | null, conn: unknown) => void) {
          conn.pragma('journal_mode = WAL');
          conn.pragma('busy_timeout = 5000');
          conn.pragma('foreign_keys = ON');
          conn.pragma('synchronous = NORMAL');
          conn.pragma('wal_autocheckpoint = 4000'); // the API's bound on the WAL (its checkpoints run on a thread)
          done(null, conn);
        },
      },
    })
  : knex({ client: 'pg', connection: url, pool: { min: 0, max: 10 } });

interface Principal { keyId: string; orgId: string; scopes: Set<string> }
type Authed = Request & { principal?: Principal };

class HttpError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) { super(message); }
}

async function authenticate(req: Authed): Promise<boolean> {
  const match = /^Bearer +(\S+)$/i.exec(req.headers.authorization ?? '');
  if (!match) throw new HttpError(401, 'UNAUTHENTICATED', 'missing bearer token');
  const hash = createHash('sha256').update(match[1]).digest('hex');
  const key = await db('api_keys').where({ secret_hash: hash }).first('id', 'org_id', 'scopes', 'revoked_at');
  if (!key || key.revoked_at) throw new HttpError(401, 'UNAUTHENTICATED', 'invalid API key');
  req.principal = { keyId: key.id, orgId: key.org_id, scopes: new Set(String(key.scopes).split(' ')) };
  return true;
}

function requireScope(req: Authed, scope: string): Principal {
  const principal = req.principal!;
  if (!principal.scopes.has(scope)) throw new HttpError(403, 'INSUFFICIENT_SCOPE', `needs ${scope}`);
  return principal;
}

const nullable = (v: unknown) => (v === null || v === undefined ? null : Number(v));
const bool = (v: unknown) => (v === null || v === undefined ? null : Boolean(v));

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.get('/healthz', async (_req, res) => {
  await db.raw('select 1');
  res.json({ status: 'ok' });
});
app.use(express.json({ limit: Number(process.env.MAX_BODY_BYTES ?? 1 << 20) }));
app.use(
  OpenApiValidator.middleware({
    apiSpec: path.join(__dirname, '..', '..', 'generated', 'openapi.json'),
    validateRequests: true,
    validateResponses: false,
    // the key lookup is the bearerAuth scheme's handler, as the library suggests
    validateSecurity: { handlers: { bearerAuth: (req) => authenticate(req as Authed) } },
  }),
);

app.get('/v1/checkins/:id', async (req: Authed, res, next) => {
  try {
    const principal = requireScope(req, 'checkins:read');
    const row = await db('checkins').where({ org_id: principal.orgId, id: req.params.id }).first();
    if (!row) throw new HttpError(404, 'NOT_FOUND', `checkin ${req.params.id} not found`);
    res.json({
      id: row.id,
      userId: row.user_id,
      siteId: row.site_id,
      status: row.status,
      arrivalWindowStartAt: row.arrival_window_start_at,
      arrivalWindowEndAt: row.arrival_window_end_at,
      coordinates: row.latitude === null || row.longitude === null ? null : { latitude: Number(row.latitude), longitude: Number(row.longitude), accuracyMeters: nullable(row.accuracy_meters) },
      checkInAddress: row.check_in_address,
      checkOutAddress: row.check_out_address,
      checkedInAt: row.checked_in_at,
      checkedOutAt: row.checked_out_at,
      distanceFromSiteMeters: nullable(row.distance_from_site_meters),
      withinGeofence: bool(row.within_geofence),
      suspicious: bool(row.suspicious),
      suspicionReasons: row.suspicion_reasons === null ? null : JSON.parse(row.suspicion_reasons),
      geofenceStatus: row.geofence_status,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    });
  } catch (err) {
    next(err);
  }
});

app.post('/v1/logs', async (req: Authed, res, next) => {
  try {
    const principal = requireScope(req, 'logs:write');
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
    await db('logs').insert({
      id: log.id, org_id: principal.orgId, entity_type: log.entityType, entity_id: log.entityId,
      entry_type: log.entryType, message: log.message, source: log.source, created_at: log.createdAt,
    });
    res.status(201).location(`/v1/logs/${log.id}`).json(log);
  } catch (err) {
    next(err);
  }
});

app.use((err: { status?: number; code?: string; message: string }, _req: Request, res: Response, _next: NextFunction) => {
  const status = err.status ?? 500;
  res.status(status).json({ error: err.message, code: err.code ?? (status === 400 ? 'VALIDATION_ERROR' : 'ERROR') });
});

app.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
