import { createBenchDatabase, BenchDatabase } from '../lib/database';
import { measureInterleaved, Measured } from '../lib/load';
import { startServer, ServerProcess } from '../lib/processes';
import { SERVER_ENTRY, SERVER_NODE_OPTIONS } from '../lib/build';
import { API_ENV, expectStatus, Measurement, Settings } from './context';

const CONNECTIONS = 32;
/** High enough that the measured key is never refused: the cost of counting, not of refusing. */
const NEVER_REACHED = { RATE_LIMIT_PER_MINUTE: '10000000' };

/**
 * limits: the read scenario (`GET /v1/checkins/{id}`, 32 connections) with the rate limiter on
 * each store against the same server with `RATE_LIMIT_STORE=off`, interleaved:
 * memory and Redis on SQLite, Postgres on Postgres. Then the same read with WEB_CONCURRENCY=2
 * against 1. Redis from REDIS_URL or TEST_REDIS_URL, Postgres from DATABASE_URL or
 * TEST_DATABASE_URL; a store without its server is left out (logged).
 */
export async function limitsScenario(settings: Settings): Promise<Measurement[]> {
  const redisUrl = process.env.REDIS_URL ?? process.env.TEST_REDIS_URL;
  const postgresUrl = settings.postgresUrl ?? process.env.TEST_DATABASE_URL;
  const rows: Measurement[] = [];

  const sqliteStores: Variant[] = [{ name: 'memory', env: { RATE_LIMIT_STORE: 'memory' } }];
  if (redisUrl) sqliteStores.push({ name: 'redis', env: { RATE_LIMIT_STORE: 'redis', REDIS_URL: redisUrl, RATE_LIMIT_KEY_PREFIX: `bench-${Date.now()}` } });
  else settings.log('  limits: Redis store left out (set REDIS_URL or TEST_REDIS_URL)');
  rows.push(...(await compare(settings, 'limits (sqlite)', undefined, { name: 'off', env: { RATE_LIMIT_STORE: 'off' } }, sqliteStores)));

  if (postgresUrl) {
    rows.push(...(await compare(settings, 'limits (postgres)', postgresUrl, { name: 'off', env: { RATE_LIMIT_STORE: 'off' } }, [{ name: 'postgres', env: { RATE_LIMIT_STORE: 'postgres' } }])));
  } else {
    settings.log('  limits: Postgres store left out (set DATABASE_URL or TEST_DATABASE_URL to a Postgres URL)');
  }

  rows.push(...(await compare(settings, 'processes', settings.postgresUrl, { name: 'WEB_CONCURRENCY=1', env: {} }, [{ name: 'WEB_CONCURRENCY=2', env: { WEB_CONCURRENCY: '2' } }])));
  return rows;
}

type Variant = { name: string; env: Record<string, string> };

async function compare(settings: Settings, scenario: string, postgresUrl: string | undefined, baseline: Variant, variants: Variant[]): Promise<Measurement[]> {
  const db = await createBenchDatabase(scenario.replace(/\W+/g, '-'), postgresUrl);
  const servers: ServerProcess[] = [];
  try {
    const all = [baseline, ...variants];
    for (const v of all) servers.push(await startApiWith(db, `${scenario} ${v.name}`, v.env));
    const checkin = await expectStatus(servers[0].url, db.secret, 'POST', '/v1/checkins', 201, { userId: 'bench-user', siteId: 'site_bench_00' });
    const path = `/v1/checkins/${checkin.id}`;
    for (const s of servers) await expectStatus(s.url, db.secret, 'GET', path, 200);

    settings.log(`  ${scenario}: GET ${path}, ${CONNECTIONS} connections, ${all.map((v) => v.name).join(' / ')}`);
    const results = await measureInterleaved(
      all.map((v, i) => ({ name: v.name, target: { url: servers[i].url, server: servers[i], connections: CONNECTIONS, headers: { authorization: `Bearer ${db.secret}` }, requests: () => [{ method: 'GET', path }] } })),
      settings.plan,
      settings.log,
    );
    const rss = await Promise.all(servers.map((s) => s.stop()));
    const base = results[baseline.name];
    return all.map((v, i) => ({
      scenario,
      subject: v.name,
      ...figures(results[v.name]),
      peakRssMb: rss[i],
      ...(i === 0 ? {} : { baseline: `${scenario} / ${baseline.name}`, ratio: results[v.name].median.requestsPerSec / base.median.requestsPerSec }),
      detail: results[v.name],
    }));
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await db.dispose();
  }
}

function startApiWith(db: BenchDatabase, name: string, env: Record<string, string>): Promise<ServerProcess> {
  return startServer({ name, args: [...SERVER_NODE_OPTIONS, SERVER_ENTRY], env: { ...API_ENV, ...NEVER_REACHED, ...env, DATABASE_URL: db.serverUrl } });
}

function figures(m: Measured) {
  return { requestsPerSec: m.median.requestsPerSec, p50Ms: m.median.p50Ms, p99Ms: m.median.p99Ms, failures: m.failures, cpuMsPerRequest: m.median.cpuMsPerRequest };
}
