import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newIdBatch } from '../../ids';
import { normalizeTimestamp, nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { dialectOf } from '../databaseErrors';
import { rowsOf } from '../rawRows';
import { onSqliteConnection } from '../database';
import type { ListFilters } from '../listFilters';

export type SensorReading = components['schemas']['SensorReading'];
export type SensorReadingInput = components['schemas']['SensorReadingInput'];
export type SensorReadingIngestResult = components['schemas']['SensorReadingIngestResult'];
type IngestedSensorReading = components['schemas']['IngestedSensorReading'];

interface SensorReadingRow {
  seq: number;
  id: string;
  org_id: string;
  provider: string;
  sensor_external_id: string;
  sensor_name: string | null;
  site_id: string;
  metric: string;
  value: number;
  unit: string;
  occurred_at: string;
  created_at: string;
}

type NewRow = Omit<SensorReadingRow, 'seq'>;

const INSERT_COLUMNS = ['id', 'org_id', 'provider', 'sensor_external_id', 'sensor_name', 'site_id', 'metric', 'value', 'unit', 'occurred_at', 'created_at'] as const;
const ID_PREFIX = 'srd';
const IDENTITY_COLUMNS = 'provider, sensor_external_id, metric, occurred_at';

/**
 * Readings per duplicate look-up: 500 × 4 parameters stays far below the bound-parameter limits
 * (SQLite 32766, Postgres 65535). Inserts do not use Knex's multi-row insert at all: on SQLite it
 * compiles to a compound select, which fails above 500 rows (docs/architecture.md, "Known traps in the stack").
 */
const LOOKUP_ROWS_PER_STATEMENT = 500;

const INSERT_INTO = `insert into sensor_readings (${INSERT_COLUMNS.join(', ')})`;
const ON_CONFLICT = ` on conflict (org_id, ${IDENTITY_COLUMNS}) do nothing`;
const SQLITE_INSERT_SQL = `${INSERT_INTO} values (${INSERT_COLUMNS.map(() => '?').join(', ')})${ON_CONFLICT}`;

function toReading(row: SensorReadingRow | NewRow): SensorReading {
  return {
    id: row.id,
    provider: row.provider,
    sensorExternalId: row.sensor_external_id,
    sensorName: row.sensor_name,
    siteId: row.site_id,
    metric: row.metric,
    value: Number(row.value),
    unit: row.unit,
    occurredAt: row.occurred_at,
    createdAt: row.created_at,
  };
}

/** The identity of a reading within an organization (docs/architecture.md, "Logs and sensor readings"). */
function identityOf(row: { provider: string; sensor_external_id: string; metric: string; occurred_at: string }): string {
  return JSON.stringify([row.provider, row.sensor_external_id, row.metric, row.occurred_at]);
}

function byIdentity(a: NewRow, b: NewRow): number {
  return compare(a.provider, b.provider) || compare(a.sensor_external_id, b.sensor_external_id) || compare(a.metric, b.metric) || compare(a.occurred_at, b.occurred_at);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Stores a batch in the caller's transaction, skipping readings whose identity is already
 * stored or repeats earlier in the batch. `data[i]` answers `inputs[i]` with the stored reading.
 * `INSERT … ON CONFLICT DO NOTHING` tells which rows are new, so the common case (fresh
 * telemetry) costs no extra query; only duplicates are read back.
 */
export async function ingestSensorReadings(db: Knex, orgId: string, inputs: readonly SensorReadingInput[]): Promise<SensorReadingIngestResult> {
  const createdAt = nowIso();
  const ids = newIdBatch(ID_PREFIX, inputs.length);
  const candidates: NewRow[] = [];
  const firstOfIdentity = new Map<string, NewRow>();
  const answers: { row: NewRow; repeated: boolean }[] = new Array(inputs.length);
  for (let i = 0; i < inputs.length; i++) {
    const input = inputs[i];
    const occurredAt = normalizeTimestamp(input.occurredAt);
    const identity = identityOf({ provider: input.provider, sensor_external_id: input.sensorExternalId, metric: input.metric, occurred_at: occurredAt });
    const earlier = firstOfIdentity.get(identity);
    if (earlier) {
      answers[i] = { row: earlier, repeated: true };
      continue;
    }
    const row: NewRow = {
      id: ids[i],
      org_id: orgId,
      provider: input.provider,
      sensor_external_id: input.sensorExternalId,
      sensor_name: input.sensorName ?? null,
      site_id: input.siteId,
      metric: input.metric,
      value: input.value,
      unit: input.unit,
      occurred_at: occurredAt,
      created_at: createdAt,
    };
    firstOfIdentity.set(identity, row);
    candidates.push(row);
    answers[i] = { row, repeated: false };
  }

  // Identity order: two concurrent Postgres batches sharing readings then wait for each other's
  // index entries in the same order instead of deadlocking. Both databases do it, so that
  // readings of one batch with the same occurredAt list in the same (storage) order on both.
  candidates.sort(byIdentity);
  const insertedIds = dialectOf(db) === 'sqlite' ? await insertOnSqlite(db, candidates) : await insertOnPostgres(db, candidates);

  const alreadyStored = candidates.filter((row) => !insertedIds.has(row.id));
  const storedByIdentity = alreadyStored.length ? await findByIdentity(db, orgId, alreadyStored) : new Map<string, SensorReadingRow>();

  const data: IngestedSensorReading[] = answers.map(({ row, repeated }) => {
    const stored = insertedIds.has(row.id) ? row : storedByIdentity.get(identityOf(row));
    // a conflict means the row exists in this transaction's view; absent would be a bug, not a client error
    if (!stored) throw new Error(`sensor reading ${identityOf(row)} conflicted but cannot be read back`);
    return { ...toReading(stored), duplicate: repeated || stored !== row };
  });
  return { ingested: insertedIds.size, duplicates: inputs.length - insertedIds.size, data };
}

/**
 * SQLite: one prepared single-row statement run per reading on the transaction's own
 * better-sqlite3 connection. Measured faster than multi-row `VALUES … RETURNING` there (no
 * result buffering, no 5500-parameter statement to compile) and it skips Knex, which prepares
 * every statement anew (docs/architecture.md, "Known traps in the stack"). `changes` says whether the row was new.
 */
async function insertOnSqlite(db: Knex, rows: readonly NewRow[]): Promise<Set<string>> {
  return onSqliteConnection(db, (conn) => {
    const inserted = new Set<string>();
    const statement = conn.prepare(SQLITE_INSERT_SQL);
    for (const row of rows) {
      const { changes } = statement.run(row.id, row.org_id, row.provider, row.sensor_external_id, row.sensor_name, row.site_id, row.metric, row.value, row.unit, row.occurred_at, row.created_at);
      if (changes > 0) inserted.add(row.id);
    }
    return inserted;
  });
}

/**
 * Postgres: the whole batch in one statement, one array parameter per column (`unnest`), so
 * the statement has 11 parameters whatever the batch size: measured about twice as fast as a
 * multi-row `VALUES` list, which Postgres must parse and plan with 5500 parameters per 500 rows.
 * `RETURNING id` names the new rows.
 */
async function insertOnPostgres(db: Knex, rows: readonly NewRow[]): Promise<Set<string>> {
  const columns = INSERT_COLUMNS.map((column) => rows.map((row) => row[column]));
  const arrays = INSERT_COLUMNS.map((column) => (column === 'value' ? '?::float8[]' : '?::text[]')).join(', ');
  const sql = `${INSERT_INTO} select * from unnest(${arrays})${ON_CONFLICT} returning id`;
  const result = await db.raw(sql, columns as unknown as Knex.RawBinding[]);
  return new Set(rowsOf<{ id: string }>(result).map(({ id }) => id));
}

async function findByIdentity(db: Knex, orgId: string, rows: readonly NewRow[]): Promise<Map<string, SensorReadingRow>> {
  const found = new Map<string, SensorReadingRow>();
  for (let start = 0; start < rows.length; start += LOOKUP_ROWS_PER_STATEMENT) {
    const chunk = rows.slice(start, start + LOOKUP_ROWS_PER_STATEMENT);
    const bindings: Knex.RawBinding[] = [orgId];
    for (const row of chunk) bindings.push(row.provider, row.sensor_external_id, row.metric, row.occurred_at);
    // row-value IN (VALUES …): SQLite ≥ 3.15 and Postgres; served by the dedup index
    const sql = `select * from sensor_readings where org_id = ? and (${IDENTITY_COLUMNS}) in (values ${new Array(chunk.length).fill('(?, ?, ?, ?)').join(', ')})`;
    for (const stored of rowsOf<SensorReadingRow>(await db.raw(sql, bindings))) found.set(identityOf(stored), stored);
  }
  return found;
}


export async function findSensorReading(db: Knex, orgId: string, id: string): Promise<SensorReading | undefined> {
  const row = await db<SensorReadingRow>('sensor_readings').where({ org_id: orgId, id }).first();
  return row && toReading(row);
}

/** occurredAfter/occurredBefore arrive normalized to ISO UTC with milliseconds (both exclusive). */
export type SensorReadingFilter = ListFilters<'listSensorReadings'>;

/**
 * Ordered by occurredAt, ties by storage order: the key the list indexes end in. One sensor's
 * readings come from the identity index, which holds them by time (migration 0012), the few of
 * one instant then put in `seq` order. SQLite, which keeps no statistics here, would rather
 * walk all of the organization's readings in time order than sort those few rows, so on SQLite
 * the query names that index.
 */
export async function listSensorReadings(db: Knex, orgId: string, filter: SensorReadingFilter, page: PageRequest): Promise<Page<SensorReading>> {
  const bySensor = filter.sensorExternalId !== undefined && dialectOf(db) === 'sqlite';
  const query = db<SensorReadingRow>(bySensor ? db.raw('?? indexed by ??', ['sensor_readings', 'sensor_readings_identity']) : 'sensor_readings').where({ org_id: orgId });
  if (filter.siteId !== undefined) query.where('site_id', filter.siteId);
  if (filter.provider !== undefined) query.where('provider', filter.provider);
  if (filter.sensorExternalId !== undefined) query.where('sensor_external_id', filter.sensorExternalId);
  if (filter.metric !== undefined) query.where('metric', filter.metric);
  if (filter.occurredAfter !== undefined) query.where('occurred_at', '>', filter.occurredAfter);
  if (filter.occurredBefore !== undefined) query.where('occurred_at', '<', filter.occurredBefore);
  return fetchPage(query, ['occurred_at', 'seq'], page, toReading);
}
