import { randomBytes } from 'node:crypto';
import type autocannon from 'autocannon';
import { createBenchDatabase, createSqlite, BenchDatabase } from '../lib/database';
import { measureInterleaved, LoadTarget, Measured, Phase } from '../lib/load';
import type { ServerProcess } from '../lib/processes';
import { BASELINE_FLOOR, BASELINE_NODE_HTTP, expectStatus, Measurement, Settings, startApi, startBaseline, startPeer, WITHOUT_EVENTS } from './context';

const READ_CONNECTIONS = 32;
const WRITE_CONNECTIONS = 32;

/** A check-in made through the API, and the same row copied into the baselines' SQLite file. */
async function checkinFixture(api: ServerProcess, apiDb: BenchDatabase, floorDb: BenchDatabase): Promise<string> {
  const checkin = await expectStatus(api.url, apiDb.secret, 'POST', '/v1/checkins', 201, { userId: 'bench-user', siteId: 'site_bench_00' });
  const row = await apiDb.getRow('checkins', checkin.id);
  if (!row) throw new Error(`check-in ${checkin.id} is not in the checkins table`);
  delete row.seq;
  await floorDb.insertRow('checkins', { ...row, org_id: floorDb.orgId });
  return checkin.id as string;
}

function getTarget(server: ServerProcess, connections: number, path: string, headers: Record<string, string> = {}): LoadTarget {
  return { url: server.url, server, connections, headers, requests: () => [{ method: 'GET', path }] };
}

/**
 * read: `GET /v1/checkins/{id}` with a valid key, 32 connections, against the peer (express +
 * express-openapi-validator + Knex on the API's database), the framework floor (express 5 +
 * the same row by a prepared statement) and bare node:http, interleaved.
 */
export async function readScenario(settings: Settings): Promise<Measurement[]> {
  const apiDb = await createBenchDatabase('read', settings.postgresUrl);
  const floorDb = await createSqlite('read-floor');
  const servers: ServerProcess[] = [];
  try {
    const api = await startApi(settings, apiDb, 'read');
    servers.push(api);
    const floor = await startBaseline(BASELINE_FLOOR, 'express floor', floorDb);
    servers.push(floor);
    const bare = await startBaseline(BASELINE_NODE_HTTP, 'node:http', floorDb);
    servers.push(bare);
    const peer = await startPeer(apiDb);
    servers.push(peer);
    const id = await checkinFixture(api, apiDb, floorDb);
    const path = `/v1/checkins/${id}`;
    const [viaApi, viaPeer] = [await expectStatus(api.url, apiDb.secret, 'GET', path, 200), await expectStatus(peer.url, apiDb.secret, 'GET', path, 200)];
    if (JSON.stringify(viaApi) !== JSON.stringify(viaPeer)) throw new Error(`the peer answers another check-in than the API:\n${JSON.stringify(viaPeer)}\n${JSON.stringify(viaApi)}`);
    await expectStatus(floor.url, '', 'GET', path, 200);
    await expectStatus(bare.url, '', 'GET', path, 200);

    settings.log(`  read: GET ${path}, ${READ_CONNECTIONS} connections`);
    const results = await measureInterleaved(
      [
        { name: 'api', target: getTarget(api, READ_CONNECTIONS, path, { authorization: `Bearer ${apiDb.secret}` }) },
        { name: 'peer', target: getTarget(peer, READ_CONNECTIONS, path, { authorization: `Bearer ${apiDb.secret}` }) },
        { name: 'express floor', target: getTarget(floor, READ_CONNECTIONS, path) },
        { name: 'node:http', target: getTarget(bare, READ_CONNECTIONS, path) },
      ],
      settings.plan,
      settings.log,
    );
    const floorRate = results['express floor'].median.requestsPerSec;
    const rss = await Promise.all(servers.map((s) => s.stop()));
    const peerRate = results.peer.median.requestsPerSec;
    return [
      { scenario: 'read', subject: 'api', ...figures(results.api), peakRssMb: rss[0], baseline: 'read / express floor', ratio: results.api.median.requestsPerSec / floorRate, cpuRatio: cpuRatio(results.api, results['express floor']), detail: results.api },
      { scenario: 'read', subject: 'api ÷ peer', baseline: 'read / peer', ratio: results.api.median.requestsPerSec / peerRate, cpuRatio: cpuRatio(results.api, results.peer), note: `p99 ${results.api.median.p99Ms.toFixed(1)} vs ${results.peer.median.p99Ms.toFixed(1)} ms` },
      { scenario: 'read', subject: 'peer', ...figures(results.peer), peakRssMb: rss[3], note: 'express + express-openapi-validator + Knex, key by hash per request, same database', detail: results.peer },
      { scenario: 'read', subject: 'express floor', ...figures(results['express floor']), peakRssMb: rss[1], detail: results['express floor'] },
      { scenario: 'read', subject: 'node:http', ...figures(results['node:http']), peakRssMb: rss[2], baseline: 'read / express floor', ratio: results['node:http'].median.requestsPerSec / floorRate, cpuRatio: cpuRatio(results['node:http'], results['express floor']), note: 'for the record', detail: results['node:http'] },
    ];
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await apiDb.dispose();
    await floorDb.dispose();
  }
}

/**
 * write: `POST /v1/logs`, 32 connections: through the API with a fresh Idempotency-Key per
 * request and without one, against the peer's plain write (same database) and the framework
 * floor doing the same insert, interleaved. After each phase the rows each subject stored
 * (told apart by the message's prefix) must match its 201s. The cost of recording events: the
 * same API with a key, served by a second process whose `recordEvent` is a no-op
 * (lib/withoutEvents.cjs), on the same database, interleaved with the others. That process
 * serves the same mix as the api process (a keyed phase, then an unkeyed one, every round):
 * two identical processes compared, one of which had only ever served keyed writes, differed by
 * about 5% (bench/README.md, "Cost of events"). `--events-aa` starts that second process with
 * its events on, to check the comparison itself: its ratio should then be about 1.00.
 */
export async function writeScenario(settings: Settings): Promise<Measurement[]> {
  const apiDb = await createBenchDatabase('write', settings.postgresUrl);
  const floorDb = await createSqlite('write-floor');
  const servers: ServerProcess[] = [];
  try {
    const api = await startApi(settings, apiDb, 'write');
    servers.push(api);
    const floor = await startBaseline(BASELINE_FLOOR, 'express floor', floorDb);
    servers.push(floor);
    const peer = await startPeer(apiDb);
    servers.push(peer);
    const noEvents = await startApi(settings, apiDb, settings.eventsAa ? 'write-twin' : 'write-no-events', settings.eventsAa ? [] : WITHOUT_EVENTS);
    servers.push(noEvents);
    const entityId = await checkinFixture(api, apiDb, floorDb);

    const run = randomBytes(6).toString('hex');
    let n = 0;
    const writeRequests = (tag: string, withKey: boolean) => (): autocannon.Request[] => [
      {
        method: 'POST',
        path: '/v1/logs',
        setupRequest: (request) => {
          const i = n++;
          return {
            ...request,
            headers: withKey ? { ...request.headers, 'idempotency-key': `bench-${run}-${i}` } : request.headers,
            body: `{"entityType":"checkin","entityId":"${entityId}","message":"bench ${tag} ${i}"}`,
          };
        },
      },
    ];
    // every 201 is one stored row. A phase ends on a timer, cutting off up to one request per
    // connection, which may still be stored after its answer went unseen: so over the whole
    // run, stored ≥ answered 201 and at most one more per connection and phase.
    const counted = async (db: BenchDatabase, tag: string) => {
      const mine = { column: 'message', value: `bench ${tag} ` };
      const before = await db.count('logs', mine);
      let created = 0;
      let phases = 0;
      return async (phase: Phase) => {
        created += phase.statusCounts['201'] ?? 0;
        phases++;
        const stored = (await settledCount(db, 'logs', mine)) - before;
        if (stored < created || stored > created + phases * WRITE_CONNECTIONS) throw new Error(`write ${tag}: ${stored} log rows stored for ${created} answers 201`);
      };
    };
    const jsonHeaders = { 'content-type': 'application/json' };
    const authorized = { ...jsonHeaders, authorization: `Bearer ${apiDb.secret}` };
    const target = (server: ServerProcess, headers: Record<string, string>, tag: string, withKey: boolean) =>
      ({ url: server.url, server, connections: WRITE_CONNECTIONS, headers, requests: writeRequests(tag, withKey) });
    settings.log(`  write: POST /v1/logs, ${WRITE_CONNECTIONS} connections: api with a fresh Idempotency-Key each, api without, api without events with a key and without, peer, floor`);
    const results = await measureInterleaved(
      [
        { name: 'api', target: target(api, authorized, 'api', true), after: await counted(apiDb, 'api') },
        { name: 'api (no key)', target: target(api, authorized, 'plain', false), after: await counted(apiDb, 'plain') },
        { name: 'api (no events)', target: target(noEvents, authorized, 'noevents', true), after: await counted(apiDb, 'noevents') },
        // the same mix as the api process serves (see above)
        { name: 'api (no events, no key)', target: target(noEvents, authorized, 'noeventsplain', false), after: await counted(apiDb, 'noeventsplain') },
        { name: 'peer', target: target(peer, authorized, 'peer', false), after: await counted(apiDb, 'peer') },
        { name: 'express floor', target: target(floor, jsonHeaders, 'floor', false), after: await counted(floorDb, 'floor') },
      ],
      settings.plan,
      settings.log,
    );
    const rss = await Promise.all(servers.map((s) => s.stop()));
    // one log.created per log the real API stored, none for the process without events (with
    // --events-aa, one per log of both)
    const events = await apiDb.count('events', { column: 'type', value: 'log.created' });
    let logsWithEvents = 0;
    for (const tag of settings.eventsAa ? ['api', 'plain', 'noevents', 'noeventsplain'] : ['api', 'plain']) logsWithEvents += await apiDb.count('logs', { column: 'message', value: `bench ${tag} ` });
    if (events !== logsWithEvents) throw new Error(`write: ${events} log.created events for ${logsWithEvents} logs stored by the API (${settings.eventsAa ? 'both processes record events' : 'the process without events must record none'})`);
    const floorRate = results['express floor'].median.requestsPerSec;
    const peerRate = results.peer.median.requestsPerSec;
    const plain = results['api (no key)'];
    const withoutEvents = results['api (no events)'];
    const plainWithoutEvents = results['api (no events, no key)'];
    // each round's two phases side by side, which the machine's drift touches least
    const perRound = (a: Measured, b: Measured) => `per round ${a.repetitions.map((phase, i) => (phase.requestsPerSec / b.repetitions[i].requestsPerSec).toFixed(2)).join(', ')}`;
    return [
      { scenario: 'write', subject: 'api', ...figures(results.api), peakRssMb: rss[0], baseline: 'write / express floor', ratio: results.api.median.requestsPerSec / floorRate, cpuRatio: cpuRatio(results.api, results['express floor']), note: 'fresh Idempotency-Key each', detail: results.api },
      { scenario: 'write', subject: 'api ÷ peer', baseline: 'write / peer', ratio: results.api.median.requestsPerSec / peerRate, cpuRatio: cpuRatio(results.api, results.peer), note: 'with a key vs the peer without' },
      { scenario: 'write', subject: 'api (no key)', ...figures(plain), peakRssMb: rss[0], baseline: 'write / peer', ratio: plain.median.requestsPerSec / peerRate, cpuRatio: cpuRatio(plain, results.peer), note: 'no Idempotency-Key', detail: plain },
      { scenario: 'write', subject: 'api ÷ api (no events)', baseline: 'write / api (no events)', ratio: results.api.median.requestsPerSec / withoutEvents.median.requestsPerSec, cpuRatio: cpuRatio(results.api, withoutEvents), note: `what recording events leaves of the write throughput; ${perRound(results.api, withoutEvents)}` },
      { scenario: 'write', subject: 'api (no events)', ...figures(withoutEvents), peakRssMb: rss[3], note: settings.eventsAa ? 'fresh Idempotency-Key each; --events-aa: a second API process with its events on, same database' : 'fresh Idempotency-Key each; recordEvent a no-op (lib/withoutEvents.cjs), same database', detail: withoutEvents },
      { scenario: 'write', subject: 'api (no key) ÷ api (no events, no key)', baseline: 'write / api (no events)', ratio: plain.median.requestsPerSec / plainWithoutEvents.median.requestsPerSec, cpuRatio: cpuRatio(plain, plainWithoutEvents), note: `for the record: the same without a key; ${perRound(plain, plainWithoutEvents)}` },
      { scenario: 'write', subject: 'api (no events, no key)', ...figures(plainWithoutEvents), peakRssMb: rss[3], note: 'no Idempotency-Key; the same process as api (no events)', detail: plainWithoutEvents },
      { scenario: 'write', subject: 'peer', ...figures(results.peer), peakRssMb: rss[2], note: 'express + express-openapi-validator + Knex, key by hash per request, same database', detail: results.peer },
      { scenario: 'write', subject: 'express floor', ...figures(results['express floor']), peakRssMb: rss[1], detail: results['express floor'] },
    ];
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await apiDb.dispose();
    await floorDb.dispose();
  }
}

/** The row count once requests cut off at the end of a phase have finished (two equal reads 50 ms apart). */
export async function settledCount(db: BenchDatabase, table: string, prefix?: { column: string; value: string }): Promise<number> {
  let last = await db.count(table, prefix);
  for (;;) {
    await new Promise((r) => setTimeout(r, 50));
    const now = await db.count(table, prefix);
    if (now === last) return now;
    last = now;
  }
}

export function figures(m: { median: { requestsPerSec: number; p50Ms: number; p99Ms: number; cpuMsPerRequest: number }; failures: number }) {
  return { requestsPerSec: m.median.requestsPerSec, p50Ms: m.median.p50Ms, p99Ms: m.median.p99Ms, cpuMsPerRequest: m.median.cpuMsPerRequest, failures: m.failures };
}

/** The baseline's CPU time per request over the subject's: the throughput ratio a quiet machine would show when both are CPU-bound. */
export function cpuRatio(subject: { median: { cpuMsPerRequest: number } }, baseline: { median: { cpuMsPerRequest: number } }): number {
  return baseline.median.cpuMsPerRequest / subject.median.cpuMsPerRequest;
}
