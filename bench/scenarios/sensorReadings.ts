import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type autocannon from 'autocannon';
import { createBenchDatabase, createSqlite, BenchDatabase } from '../lib/database';
import { LoadTarget, median, Phase, runPhase, summarize, Measured } from '../lib/load';
import { IngestStream, queryPaths } from '../lib/readings';
import type { ServerProcess } from '../lib/processes';
import { InProcessBaseline, InProcessPhase, InProcessResult, queryLimit, storageLimit, summarizeInProcess } from '../baselines/inProcess';
import { expectStatus, Settings, startApi } from './context';

export const BATCH_SIZE = 500;
export const INGEST_CONNECTIONS = 8;
export const QUERY_CONNECTIONS = 8;

export interface IngestPhase extends Phase {
  acknowledged: number;
  readingsPerSec: number;
}

export interface IngestResult {
  median: { readingsPerSec: number; requestsPerSec: number; p50Ms: number; p99Ms: number; cpuMsPerRequest: number };
  repetitions: IngestPhase[];
  failures: number;
  /** Readings acknowledged (`ingested`) over all phases, each checked against the stored rows. */
  acknowledged: number;
}

export interface StageResult {
  seeded: number;
  seedSeconds: number;
  query: Measured;
  ingest: IngestResult;
  peakRssMb: number;
  baselines?: { query: InProcessResult; ingest: InProcessResult };
}

interface Stage {
  label: string;
  seeded: number;
  seedSeconds: number;
  apiDb: BenchDatabase;
  baseDb?: BenchDatabase;
  api?: ServerProcess;
  queryTarget?: LoadTarget;
  ingester?: Ingester;
  queryBaseline?: InProcessBaseline;
  ingestBaseline?: InProcessBaseline;
}

/**
 * A stored volume: readings seeded straight into a fresh database, the API started on it,
 * and (with `withBaselines`) a SQLite file seeded alike for the in-process baselines.
 */
async function prepareStage(settings: Settings, seeded: number, label: string, withBaselines: boolean): Promise<Stage> {
  const stage: Stage = { label, seeded, seedSeconds: 0, apiDb: await createBenchDatabase(label, settings.postgresUrl) };
  try {
    const seedStart = performance.now();
    await stage.apiDb.seedReadings(seeded);
    stage.seedSeconds = (performance.now() - seedStart) / 1000;
    settings.log(`  ${label}: seeded ${seeded.toLocaleString('en-US')} readings in ${stage.seedSeconds.toFixed(1)} s (${stage.apiDb.dialect})`);
    if (withBaselines) {
      stage.baseDb = await createSqlite(`${label}-baseline`);
      await stage.baseDb.seedReadings(seeded);
    }
    const api = (stage.api = await startApi(settings, stage.apiDb, label));
    const auth = { authorization: `Bearer ${stage.apiDb.secret}` };

    // query: GET /v1/sensor-readings?siteId=…&occurredAfter=…&limit=100, cycling through fixed starting points
    const queries = queryPaths(seeded, 256);
    const sample = await expectStatus(api.url, stage.apiDb.secret, 'GET', queries[0].path, 200);
    if (sample.data.length !== 100 || sample.nextCursor === null) throw new Error(`${label}: the sample query answered ${sample.data.length} readings, expected a full page of 100`);
    let q = 0;
    stage.queryTarget = {
      url: api.url,
      server: api,
      connections: QUERY_CONNECTIONS,
      headers: auth,
      requests: () => [{ method: 'GET', path: queries[0].path, setupRequest: (request) => ({ ...request, path: queries[q++ % queries.length].path }) }],
    };
    stage.ingester = new Ingester(api, auth, stage.apiDb);
    await stage.ingester.init();
    if (stage.baseDb) {
      stage.queryBaseline = queryLimit(stage.baseDb.file!, stage.baseDb.orgId, queries);
      stage.ingestBaseline = storageLimit(stage.baseDb.file!, stage.baseDb.orgId, BATCH_SIZE);
    }
    return stage;
  } catch (err) {
    await disposeStage(stage);
    throw err;
  }
}

async function disposeStage(stage: Stage): Promise<void> {
  stage.queryBaseline?.close();
  stage.ingestBaseline?.close();
  await stage.api?.stop();
  await stage.apiDb.dispose();
  await stage.baseDb?.dispose();
}

/**
 * query and ingest at each stored volume (10 thousand with the in-process baselines; 1 million
 * for growth). All volumes' servers run side by side and their phases are interleaved, so a
 * noisy neighbour slows every volume alike and the growth ratios compare like with like.
 */
export async function sensorReadingsScenario(settings: Settings, volumes: { seeded: number; label: string; withBaselines: boolean }[]): Promise<StageResult[]> {
  const stages: Stage[] = [];
  try {
    for (const volume of volumes) stages.push(await prepareStage(settings, volume.seeded, volume.label, volume.withBaselines));

    settings.log(`  query: ${QUERY_CONNECTIONS} connections`);
    const query = await interleave(
      settings,
      'query',
      settings.plan,
      Math.max(1, settings.plan.warmupSeconds),
      stages.map((s) => ({ label: s.label, apiPhase: (length) => runPhase(s.queryTarget!, length), baseline: s.queryBaseline })),
    );
    settings.log(`  ingest: batches of ${BATCH_SIZE}, ${INGEST_CONNECTIONS} connections`);
    const ingest = await interleave(
      settings,
      'ingest',
      settings.ingestPlan,
      { amount: INGEST_CONNECTIONS * 3 * Math.max(1, settings.ingestPlan.warmupSeconds) },
      stages.map((s) => ({ label: s.label, apiPhase: (length) => s.ingester!.phase(length), baseline: s.ingestBaseline })),
    );

    const results: StageResult[] = [];
    for (const [i, stage] of stages.entries()) {
      const ingestPhases = ingest[i].api as IngestPhase[];
      results.push({
        seeded: stage.seeded,
        seedSeconds: stage.seedSeconds,
        query: summarize(query[i].api, query[i].apiWarmup),
        ingest: {
          median: {
            readingsPerSec: median(ingestPhases.map((p) => p.readingsPerSec)),
            requestsPerSec: median(ingestPhases.map((p) => p.requestsPerSec)),
            p50Ms: median(ingestPhases.map((p) => p.p50Ms)),
            p99Ms: median(ingestPhases.map((p) => p.p99Ms)),
            cpuMsPerRequest: median(ingestPhases.map((p) => p.cpuMsPerRequest)),
          },
          repetitions: ingestPhases,
          failures: ingestPhases.reduce((n, p) => n + p.failures, ingest[i].apiWarmup.failures),
          acknowledged: stage.ingester!.acknowledgedTotal,
        },
        peakRssMb: await stage.api!.stop(),
        baselines: stage.queryBaseline ? { query: summarizeInProcess(query[i].baseline), ingest: summarizeInProcess(ingest[i].baseline) } : undefined,
      });
    }
    return results;
  } finally {
    for (const stage of stages) await disposeStage(stage);
  }
}

type Length = number | { amount: number };

/**
 * Warm-up, then repetitions going round every subject: its API phase, then its in-process
 * baseline phase. The API's measured phases are as long as its previous phase's rate suggests,
 * in requests (`amount`): every request sent is answered before a phase ends, so the stored
 * rows can be counted exactly. `warmup` is a duration, or an amount too where rows are counted.
 */
async function interleave(
  settings: Settings,
  name: string,
  plan: Settings['plan'],
  warmup: Length,
  subjects: { label: string; apiPhase: (length: Length) => Promise<Phase>; baseline?: InProcessBaseline }[],
): Promise<{ api: Phase[]; apiWarmup: Phase; baseline: InProcessPhase[] }[]> {
  const out: { api: Phase[]; apiWarmup: Phase; baseline: InProcessPhase[]; rate: number }[] = [];
  for (const subject of subjects) {
    const apiWarmup = await subject.apiPhase(warmup);
    if (subject.baseline && plan.warmupSeconds > 0) subject.baseline.phase(plan.warmupSeconds);
    out.push({ api: [], apiWarmup, baseline: [], rate: apiWarmup.requestsPerSec });
  }
  for (let rep = 0; rep < plan.repetitions; rep++) {
    for (const [i, subject] of subjects.entries()) {
      const phase = await subject.apiPhase({ amount: Math.max(INGEST_CONNECTIONS * 4, Math.round(out[i].rate * plan.seconds)) });
      out[i].rate = phase.requestsPerSec;
      out[i].api.push(phase);
      const extra = 'readingsPerSec' in phase ? `, ${(phase as IngestPhase).readingsPerSec.toFixed(0)} readings/s` : '';
      settings.log(`    ${name} ${subject.label} api #${rep + 1}: ${phase.requestsPerSec.toFixed(1)} req/s${extra}, p50 ${phase.p50Ms.toFixed(2)} ms, p99 ${phase.p99Ms.toFixed(2)} ms, cpu ${phase.cpuMsPerRequest.toFixed(2)} ms/req${phase.failures ? `, ${phase.failures} FAILED ${JSON.stringify(phase.statusCounts)}` : ''}`);
      if (subject.baseline) {
        const b = subject.baseline.phase(plan.seconds);
        out[i].baseline.push(b);
        settings.log(`    ${name} ${subject.label} in-process #${rep + 1}: ${b.operationsPerSec.toFixed(1)} ops/s, p50 ${b.p50Ms.toFixed(3)} ms, cpu ${b.cpuMsPerRequest.toFixed(2)} ms/op`);
      }
    }
  }
  return out;
}

/**
 * Drives ingestion and checks it: after each phase the rows stored since the previous one must
 * equal the sum of `ingested` in the 201 answers (and `duplicates` must be 0, every reading
 * being new); then the table is reset to the seeded volume so each phase starts alike.
 */
class Ingester {
  private stream = new IngestStream();
  private run = randomBytes(6).toString('hex');
  private n = 0;
  private acknowledged = 0;
  private duplicates = 0;
  private unparsed = 0;
  acknowledgedTotal = 0;
  private seedSeq = 0;
  private seedCount = 0;

  constructor(private server: ServerProcess, private auth: Record<string, string>, private db: BenchDatabase) {}

  async init(): Promise<void> {
    this.seedSeq = await this.db.maxSeq('sensor_readings');
    this.seedCount = await this.db.count('sensor_readings');
  }

  private target(): LoadTarget {
    return {
      url: this.server.url,
      server: this.server,
      connections: INGEST_CONNECTIONS,
      headers: { ...this.auth, 'content-type': 'application/json' },
      requests: (): autocannon.Request[] => [
        {
          method: 'POST',
          path: '/v1/sensor-readings',
          setupRequest: (request) => ({
            ...request,
            headers: { ...request.headers, 'idempotency-key': `bench-${this.run}-${this.n++}` },
            body: this.stream.batchBody(BATCH_SIZE),
          }),
          onResponse: (status, body) => {
            if (status !== 201) return;
            const ingested = /"ingested":(\d+)/.exec(body);
            const duplicates = /"duplicates":(\d+)/.exec(body);
            if (!ingested || !duplicates) this.unparsed++;
            else {
              this.acknowledged += Number(ingested[1]);
              this.duplicates += Number(duplicates[1]);
            }
          },
        },
      ],
    };
  }

  async phase(length: number | { amount: number }): Promise<IngestPhase> {
    // a timed phase would cut requests off in flight, stored without their answer being seen
    if (typeof length === 'number') throw new Error('ingest phases are measured by amount, so that every stored row is acknowledged');
    this.acknowledged = 0;
    this.duplicates = 0;
    this.unparsed = 0;
    const phase = await runPhase(this.target(), length);
    const stored = (await this.db.count('sensor_readings')) - this.seedCount;
    const answered = phase.statusCounts['201'] ?? 0;
    const problems = [];
    if (this.unparsed) problems.push(`${this.unparsed} answers without ingested/duplicates`);
    if (this.duplicates) problems.push(`${this.duplicates} readings reported as duplicates`);
    if (this.acknowledged !== answered * BATCH_SIZE) problems.push(`${this.acknowledged} readings acknowledged in ${answered} answers of ${BATCH_SIZE}`);
    if (stored !== this.acknowledged) {
      problems.push(`${stored} rows stored for ${this.acknowledged} readings acknowledged`);
    }
    if (problems.length) throw new Error(`ingest: ${problems.join('; ')}`);
    this.acknowledgedTotal += this.acknowledged;
    await this.db.deleteAfter('sensor_readings', this.seedSeq);
    return { ...phase, acknowledged: this.acknowledged, readingsPerSec: this.acknowledged / phase.seconds };
  }
}
