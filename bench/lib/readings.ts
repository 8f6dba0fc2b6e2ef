import { randomBytes } from 'node:crypto';

/**
 * The telemetry the bench stores: SENSORS sensors spread over SITES sites. Seeded history is
 * one reading per sensor per minute from SEED_START; ingested readings start a year later at
 * one per sensor per second, so they never collide with the seed nor with each other (the
 * identity is provider, sensor, metric, instant) and every reading sent must be stored.
 */
export const SENSORS = 1000;
export const SITES = 20;
const SEED_START = Date.parse('2026-01-01T00:00:00.000Z');
const INGEST_START = Date.parse('2027-01-01T00:00:00.000Z');

export const READING_COLUMNS = ['id', 'org_id', 'provider', 'sensor_external_id', 'sensor_name', 'site_id', 'metric', 'value', 'unit', 'occurred_at', 'created_at'] as const;

export function siteOf(sensor: number): string {
  return `site_bench_${String(sensor % SITES).padStart(2, '0')}`;
}

export interface ReadingInput {
  provider: string;
  sensorExternalId: string;
  siteId: string;
  metric: string;
  value: number;
  unit: string;
  occurredAt: string;
}

/** Seeded reading `n` (0-based): one per sensor per minute. */
export function seedTime(n: number): string {
  return new Date(SEED_START + Math.floor(n / SENSORS) * 60_000).toISOString();
}

/** Where in the seeded history each query starts: random but repeatable, with at least 3 minutes (≥ 150 readings per site) after it. */
export function queryPaths(seeded: number, count: number): { siteId: string; occurredAfter: string; path: string }[] {
  const minutes = Math.floor(seeded / SENSORS);
  let state = 12345;
  const next = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const out = [];
  for (let i = 0; i < count; i++) {
    const siteId = siteOf(Math.floor(next() * SITES));
    const occurredAfter = new Date(SEED_START + Math.floor(next() * Math.max(1, minutes - 3)) * 60_000 + 30_000).toISOString();
    out.push({ siteId, occurredAfter, path: `/v1/sensor-readings?siteId=${siteId}&occurredAfter=${encodeURIComponent(occurredAfter)}&limit=100` });
  }
  return out;
}

/** Unique readings for ingestion, numbered from a process-wide counter. */
export class IngestStream {
  private next = 0;

  reading(): ReadingInput {
    const n = this.next++;
    const sensor = n % SENSORS;
    return {
      provider: 'bench',
      sensorExternalId: `s${sensor}`,
      siteId: siteOf(sensor),
      metric: 'temperature_c',
      value: (n % 400) / 10,
      unit: 'C',
      occurredAt: new Date(INGEST_START + Math.floor(n / SENSORS) * 1000).toISOString(),
    };
  }

  batch(size: number): ReadingInput[] {
    const out: ReadingInput[] = new Array(size);
    for (let i = 0; i < size; i++) out[i] = this.reading();
    return out;
  }

  /** The request body for one batch, written directly (JSON.stringify of 500 objects would cost the load generator more). */
  batchBody(size: number): string {
    let body = '{"readings":[';
    for (let i = 0; i < size; i++) {
      const r = this.reading();
      body += `${i ? ',' : ''}{"provider":"${r.provider}","sensorExternalId":"${r.sensorExternalId}","siteId":"${r.siteId}","metric":"${r.metric}","value":${r.value},"unit":"${r.unit}","occurredAt":"${r.occurredAt}"}`;
    }
    return body + ']}';
  }
}

const ID_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** Random ids shaped like the server's (`srd_` + 24 base32): the id index grows as it does in production. */
export function randomIds(count: number): string[] {
  const bytes = randomBytes(count * 24);
  const out: string[] = new Array(count);
  for (let i = 0; i < count; i++) {
    let id = 'srd_';
    for (let j = 0; j < 24; j++) id += ID_ALPHABET[bytes[i * 24 + j] & 31];
    out[i] = id;
  }
  return out;
}
