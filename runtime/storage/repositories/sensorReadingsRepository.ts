import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { normalizeTimestamp, nowIso } from '../../time';
import { fetchPage, Page, PageRequest } from '../pagination';

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
const IDENTITY_COLUMNS = 'provider, sensor_external_id, metric, occurred_at';

/**
 * Rows per statement. SQLite refuses a compound select of more than 500 terms, which is what
 * Knex's multi-row insert compiles to there (style.md, known traps); a plain multi-row
 * `VALUES` list has no such limit, but 500 rows × 11 columns also stays far below both
 * databases' bound-parameter limits (SQLite 32766, Postgres 65535).
 */
const ROWS_PER_STATEMENT = 500;

const INSERT_PREFIX = `insert into sensor_readings (${INSERT_COLUMNS.join(', ')}) values `;
const INSERT_ROW = `(${INSERT_COLUMNS.map(() => '?').join(', ')})`;
const INSERT_SUFFIX = ` on conflict (org_id, ${IDENTITY_COLUMNS}) do nothing returning id`;

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

/** The identity of a reading within an organization (decisions.md §3). */
function identityOf(row: { provider: string; sensor_external_id: string; metric: string; occurred_at: string }): string {
  return JSON.stringify([row.provider, row.sensor_external_id, row.metric, row.occurred_at]);
}

/**
 * Stores a batch in the caller's transaction, skipping readings whose identity is already
 * stored or repeats earlier in the batch. `data[i]` answers `inputs[i]` with the stored reading.
 *
 * One multi-row `INSERT … ON CONFLICT DO NOTHING RETURNING id` per 500 rows (SQLite ≥ 3.35 and
 * Postgres): the returned ids say which rows are new, so the common case (fresh telemetry)
 * costs no extra query; only duplicates are read back.
 */
export async function ingestSensorReadings(db: Knex, orgId: string, inputs: readonly SensorReadingInput[]): Promise<SensorReadingIngestResult> {
  const createdAt = nowIso();
  const candidates: NewRow[] = [];
  const byIdentity = new Map<string, NewRow>();
  const answers: { row: NewRow; repeated: boolean }[] = new Array(inputs.length);
  for (let i = 0; i < inputs.length; i++) {
    const input = inputs[i];
    const occurredAt = normalizeTimestamp(input.occurredAt);
    const identity = identityOf({ provider: input.provider, sensor_external_id: input.sensorExternalId, metric: input.metric, occurred_at: occurredAt });
    const earlier = byIdentity.get(identity);
    if (earlier) {
      answers[i] = { row: earlier, repeated: true };
      continue;
    }
    const row: NewRow = {
      id: newId('srd'),
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
    byIdentity.set(identity, row);
    candidates.push(row);
    answers[i] = { row, repeated: false };
  }

  const insertedIds = new Set<string>();
  for (let start = 0; start < candidates.length; start += ROWS_PER_STATEMENT) {
    const chunk = candidates.slice(start, start + ROWS_PER_STATEMENT);
    const bindings: unknown[] = [];
    for (const row of chunk) for (const column of INSERT_COLUMNS) bindings.push(row[column]);
    const sql = INSERT_PREFIX + new Array(chunk.length).fill(INSERT_ROW).join(', ') + INSERT_SUFFIX;
    for (const { id } of rowsOf<{ id: string }>(await db.raw(sql, bindings as Knex.RawBinding[]))) insertedIds.add(id);
  }

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

async function findByIdentity(db: Knex, orgId: string, rows: readonly NewRow[]): Promise<Map<string, SensorReadingRow>> {
  const found = new Map<string, SensorReadingRow>();
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    const chunk = rows.slice(start, start + ROWS_PER_STATEMENT);
    const bindings: Knex.RawBinding[] = [orgId];
    for (const row of chunk) bindings.push(row.provider, row.sensor_external_id, row.metric, row.occurred_at);
    // row-value IN (VALUES …): SQLite ≥ 3.15 and Postgres; served by the dedup index
    const sql = `select * from sensor_readings where org_id = ? and (${IDENTITY_COLUMNS}) in (values ${new Array(chunk.length).fill('(?, ?, ?, ?)').join(', ')})`;
    for (const stored of rowsOf<SensorReadingRow>(await db.raw(sql, bindings))) found.set(identityOf(stored), stored);
  }
  return found;
}

/** `db.raw` answers the rows on better-sqlite3 and a result object on pg. */
function rowsOf<T>(result: unknown): T[] {
  return Array.isArray(result) ? (result as T[]) : ((result as { rows: T[] }).rows);
}

export async function findSensorReading(db: Knex, orgId: string, id: string): Promise<SensorReading | undefined> {
  const row = await db<SensorReadingRow>('sensor_readings').where({ org_id: orgId, id }).first();
  return row && toReading(row);
}

export interface SensorReadingFilter {
  siteId?: string;
  /** Exclusive, normalized ISO UTC. */
  occurredAfter?: string;
  /** Exclusive, normalized ISO UTC. */
  occurredBefore?: string;
  provider?: string;
  sensorExternalId?: string;
  metric?: string;
}

/** Ordered by occurredAt, ties by storage order: the key the list indexes end in. */
export async function listSensorReadings(db: Knex, orgId: string, filter: SensorReadingFilter, page: PageRequest): Promise<Page<SensorReading>> {
  const query = db<SensorReadingRow>('sensor_readings').where({ org_id: orgId });
  if (filter.siteId !== undefined) query.where('site_id', filter.siteId);
  if (filter.provider !== undefined) query.where('provider', filter.provider);
  if (filter.sensorExternalId !== undefined) query.where('sensor_external_id', filter.sensorExternalId);
  if (filter.metric !== undefined) query.where('metric', filter.metric);
  if (filter.occurredAfter !== undefined) query.where('occurred_at', '>', filter.occurredAfter);
  if (filter.occurredBefore !== undefined) query.where('occurred_at', '<', filter.occurredBefore);
  return fetchPage(query, ['occurred_at', 'seq'], page, toReading);
}
