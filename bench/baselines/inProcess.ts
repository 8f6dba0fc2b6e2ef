/**
 * In-process baselines: better-sqlite3 on a database with the server's own schema and
 * indexes (migrated by the server's migrations), no HTTP. They are the storage limits the API
 * is compared with:
 *
 * - ingest: the same kind of readings, one transaction per 500, with the same
 *   `ON CONFLICT DO NOTHING` identity check the API relies on.
 * - query: the list query the API runs for `siteId + occurredAfter + limit=100`
 *   (limit 101: one extra row says whether there is a next page), by a prepared statement.
 */
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { IngestStream, READING_COLUMNS, randomIds } from '../lib/readings';
import { median, percentile } from '../lib/load';

export interface InProcessPhase {
  seconds: number;
  operations: number;
  operationsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU time (user + system) of the bench process per operation, ms. */
  cpuMsPerRequest: number;
}

export interface InProcessResult {
  median: InProcessPhase;
  repetitions: InProcessPhase[];
}

/** A baseline measured phase by phase, so that it can be interleaved with the API's phases. */
export interface InProcessBaseline {
  phase(seconds: number): InProcessPhase;
  close(): void;
}

function open(file: string): Database.Database {
  const db = new Database(file);
  // the server's pragmas (runtime/storage/database.ts)
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 4000'); // the API's bound on the WAL (its checkpoints run on a thread)
  return db;
}

function timed(seconds: number, operation: () => void): InProcessPhase {
  const times: number[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  const end = started + seconds * 1000;
  let now = started;
  while (now < end) {
    const t0 = now;
    operation();
    now = performance.now();
    times.push(now - t0);
  }
  const elapsed = (now - started) / 1000;
  const used = process.cpuUsage(cpu);
  times.sort((a, b) => a - b);
  return {
    seconds: elapsed,
    operations: times.length,
    operationsPerSec: times.length / elapsed,
    p50Ms: percentile(times, 50),
    p99Ms: percentile(times, 99),
    cpuMsPerRequest: (used.user + used.system) / 1000 / times.length,
  };
}

export function summarizeInProcess(phases: InProcessPhase[]): InProcessResult {
  const pick = (f: (p: InProcessPhase) => number) => median(phases.map(f));
  return {
    median: {
      seconds: pick((p) => p.seconds),
      operations: pick((p) => p.operations),
      operationsPerSec: pick((p) => p.operationsPerSec),
      p50Ms: pick((p) => p.p50Ms),
      p99Ms: pick((p) => p.p99Ms),
      cpuMsPerRequest: pick((p) => p.cpuMsPerRequest),
    },
    repetitions: phases,
  };
}

/**
 * The storage limit for ingestion: batches of `batchSize` readings, one transaction and one
 * multi-row statement each. After every phase the rows it added are checked and removed, so
 * each phase starts from the same stored volume as the API's. An operation is one batch.
 */
export function storageLimit(file: string, orgId: string, batchSize: number): InProcessBaseline {
  const db = open(file);
  const row = `(${READING_COLUMNS.map(() => '?').join(', ')})`;
  const insert = db.prepare(
    `insert into sensor_readings (${READING_COLUMNS.join(', ')}) values ${new Array(batchSize).fill(row).join(', ')} ` +
      'on conflict (org_id, provider, sensor_external_id, metric, occurred_at) do nothing',
  );
  const maxSeq = () => (db.prepare('select coalesce(max(seq), 0) as n from sensor_readings').get() as { n: number }).n;
  const count = () => (db.prepare('select count(*) as n from sensor_readings').get() as { n: number }).n;
  const stream = new IngestStream();
  const batch = db.transaction(() => {
    const readings = stream.batch(batchSize);
    const ids = randomIds(batchSize);
    const createdAt = new Date().toISOString();
    const params: unknown[] = new Array(batchSize * READING_COLUMNS.length);
    let p = 0;
    for (let i = 0; i < batchSize; i++) {
      const r = readings[i];
      params[p++] = ids[i];
      params[p++] = orgId;
      params[p++] = r.provider;
      params[p++] = r.sensorExternalId;
      params[p++] = null;
      params[p++] = r.siteId;
      params[p++] = r.metric;
      params[p++] = r.value;
      params[p++] = r.unit;
      params[p++] = new Date(r.occurredAt).toISOString();
      params[p++] = createdAt;
    }
    const { changes } = insert.run(...params);
    if (changes !== batchSize) throw new Error(`storage limit: ${changes} of ${batchSize} readings stored`);
  });
  const baseSeq = maxSeq();
  const baseCount = count();
  return {
    phase(seconds) {
      const result = timed(seconds, batch);
      const stored = count() - baseCount;
      if (stored !== result.operations * batchSize) throw new Error(`storage limit: ${stored} rows stored for ${result.operations * batchSize} readings`);
      db.prepare('delete from sensor_readings where seq > ?').run(baseSeq);
      return result;
    },
    close: () => db.close(),
  };
}

/** The API's list query (siteId + occurredAfter, limit 100 + 1) by one prepared statement, cycling through `queries`. */
export function queryLimit(file: string, orgId: string, queries: { siteId: string; occurredAfter: string }[]): InProcessBaseline {
  const db = open(file);
  const select = db.prepare(
    'select * from sensor_readings where org_id = ? and site_id = ? and occurred_at > ? order by occurred_at asc, seq asc limit ?',
  );
  let i = 0;
  const query = () => {
    const q = queries[i++ % queries.length];
    const rows = select.all(orgId, q.siteId, q.occurredAfter, 101);
    if (rows.length !== 101) throw new Error(`query limit: ${rows.length} rows for ${JSON.stringify(q)}, expected 101`);
  };
  return { phase: (seconds) => timed(seconds, query), close: () => db.close() };
}
