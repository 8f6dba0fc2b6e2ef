import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { buildContract } from '../scripts/contract/bundle';
import { buildOperationIndex, renderOperationIndex } from '../scripts/contract/operations';
import { createApp, App } from '../runtime/http/app';
import { httpDate } from '../runtime/http/deprecation';
import { operations } from '../generated/operations';
import { describeEachDatabase, testClient, TestClient, anError } from './support/testApp';

const GUIDE = 'https://docs.example.com/migrations/sites-v2';

/**
 * A copy of contract/ in which getSite is deprecated with a migration guide and createSite
 * without one, turned into an operation index by the generator's own code
 * (scripts/contract/operations.ts, as `npm run generate` does) and loaded from the rendered
 * operations.ts. An app built on that index must send the signals; nothing else changes.
 */
function deprecatedContractIndex(): Record<string, any> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-deprecated-'));
  try {
    fs.cpSync(path.resolve(__dirname, '../contract'), path.join(tmp, 'contract'), { recursive: true });
    const sitesFile = path.join(tmp, 'contract/paths/sites.yaml');
    const sites = YAML.parse(fs.readFileSync(sitesFile, 'utf8'));
    Object.assign(sites.paths['/v1/sites/{id}'].get, { deprecated: true, 'x-deprecated-at': '2026-05-01', 'x-sunset': '2026-11-11', 'x-migration-guide': GUIDE });
    Object.assign(sites.paths['/v1/sites'].post, { deprecated: true, 'x-deprecated-at': '2026-06-15T12:00:00Z', 'x-sunset': '2027-01-31' });
    fs.writeFileSync(sitesFile, YAML.stringify(sites));

    const index = buildOperationIndex(buildContract(path.join(tmp, 'contract')));
    const file = path.join(tmp, 'operations.ts');
    fs.writeFileSync(file, renderOperationIndex(index));
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(file).operations;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

describe('deprecation dates as HTTP dates', () => {
  it('reads a bare date as the start of the day for Deprecation and its last second for Sunset', () => {
    expect(httpDate('2026-11-11', 'end')).toBe('Wed, 11 Nov 2026 23:59:59 GMT');
    expect(httpDate('2026-05-01', 'start')).toBe('Fri, 01 May 2026 00:00:00 GMT');
    expect(httpDate('2026-06-15T14:00:00+02:00', 'start')).toBe('Mon, 15 Jun 2026 12:00:00 GMT');
  });

  it('every deprecated operation of the real contract names its sunset (the generator refuses otherwise)', () => {
    for (const op of Object.values(operations).filter((o) => o.deprecated)) expect([op.operationId, op.sunset]).toEqual([op.operationId, expect.any(String)]);
  });
});

describeEachDatabase('deprecation signals from the contract', (t) => {
  let deprecatedApp: App;
  let http: TestClient;
  beforeAll(() => {
    const index = deprecatedContractIndex();
    expect(index.getSite).toMatchObject({ deprecated: true, sunset: '2026-11-11', deprecatedAt: '2026-05-01', migrationGuide: GUIDE });
    deprecatedApp = createApp(t.config, { db: t.db.knex, purgeIntervalMs: 0, deprecationIndex: index });
    http = testClient(deprecatedApp.app);
  });
  afterAll(() => deprecatedApp.close());

  const getSiteSignals = {
    deprecation: 'Fri, 01 May 2026 00:00:00 GMT',
    sunset: 'Wed, 11 Nov 2026 23:59:59 GMT',
    link: `<${GUIDE}>; rel="sunset"`,
  };
  const signalsOf = (headers: Record<string, string>) => ({ deprecation: headers.deprecation, sunset: headers.sunset, link: headers.link });

  it('a deprecated operation answers with Deprecation, Sunset and Link, on success and on every error', async () => {
    const site = (await http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Old road' }).expect(201)).body;
    const ok = await http.get(`/v1/sites/${site.id}`).set('Authorization', t.auth).expect(200);
    expect(signalsOf(ok.headers)).toEqual(getSiteSignals);

    const missing = await http.get('/v1/sites/site_000000000000000000000000').set('Authorization', t.auth).expect(404);
    expect(missing.body).toEqual(anError('NOT_FOUND'));
    expect(signalsOf(missing.headers)).toEqual(getSiteSignals);
    const invalid = await http.get('/v1/sites/not-an-id!').set('Authorization', t.auth).expect(400);
    expect(signalsOf(invalid.headers)).toEqual(getSiteSignals);
    const anonymous = await http.get(`/v1/sites/${site.id}`).expect(401);
    expect(signalsOf(anonymous.headers)).toEqual(getSiteSignals);
    const readOnly = await t.newKey({ scopes: ['users:read'] });
    const forbidden = await http.get(`/v1/sites/${site.id}`).set('Authorization', readOnly).expect(403);
    expect(signalsOf(forbidden.headers)).toEqual(getSiteSignals);
  });

  it('replays and idempotency conflicts of a deprecated write carry the signals; no Link without a guide', async () => {
    const signals = { deprecation: 'Mon, 15 Jun 2026 12:00:00 GMT', sunset: 'Sun, 31 Jan 2027 23:59:59 GMT', link: undefined };
    const send = (name: string) => http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'deprecated-create').send({ name });
    const first = await send('Depot').expect(201);
    expect(signalsOf(first.headers)).toEqual(signals);
    const replay = await send('Depot').expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(signalsOf(replay.headers)).toEqual(signals);
    const reused = await send('Another depot').expect(409);
    expect(reused.body).toEqual(anError('IDEMPOTENCY_KEY_REUSED'));
    expect(signalsOf(reused.headers)).toEqual(signals);
    const invalid = await http.post('/v1/sites').set('Authorization', t.auth).send({ name: '' }).expect(400);
    expect(signalsOf(invalid.headers)).toEqual(signals);
  });

  it('operations that are not deprecated carry none of the headers, in the test contract and the real one', async () => {
    const none = { deprecation: undefined, sunset: undefined, link: undefined };
    const site = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Current' }).expect(201)).body;
    expect(signalsOf((await http.get('/v1/sites').set('Authorization', t.auth).expect(200)).headers)).toEqual(none);
    expect(signalsOf((await http.patch(`/v1/sites/${site.id}`).set('Authorization', t.auth).send({ name: 'Renamed' }).expect(200)).headers)).toEqual(none);
    expect(signalsOf((await http.get('/v1/nowhere').set('Authorization', t.auth).expect(404)).headers)).toEqual(none);
    expect(operations.getSite.deprecated).toBe(false);
    expect(signalsOf((await t.http.get(`/v1/sites/${site.id}`).set('Authorization', t.auth).expect(200)).headers)).toEqual(none);
  });
});
