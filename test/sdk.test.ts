import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import SwaggerParser from '@apidevtools/swagger-parser';
import createOpenApiFetchClient from 'openapi-fetch';
import type { paths, components } from '../generated/client-types';
import openapi31 from '../generated/openapi.json';
import openapi30 from '../generated/openapi-sdk.json';
import { toOpenApi30 } from '../scripts/contract/downConvert';
import { HTTP_METHODS } from '../scripts/contract/operations';
import { describeEachDatabase, anId, aTimestamp, TestContext } from './support/testApp';
import { recordExchange } from './support/contractCheck';
import features31 from './fixtures/openapi31-features.json';

const root = path.resolve(__dirname, '..');
const run = promisify(execFile);

/** path → method → {operationId, statuses, deprecated, x-sunset}: what an SDK is generated from. */
function surface(doc: any) {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [route, item] of Object.entries<any>(doc.paths)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!op) continue;
      out[route] ??= {};
      out[route][method] = { operationId: op.operationId, statuses: Object.keys(op.responses).sort(), deprecated: op.deprecated ?? false, sunset: op['x-sunset'] ?? null };
    }
  }
  return out;
}

describe('/openapi-sdk.json: the OpenAPI 3.0.3 rendering for SDK generators', () => {
  it('is a valid OpenAPI 3.0 document (@apidevtools/swagger-parser)', async () => {
    expect(openapi30.openapi).toBe('3.0.3');
    await expect(SwaggerParser.validate(structuredClone(openapi30) as never)).resolves.toBeTruthy();
  });

  it('has the same paths, methods, operationIds, status codes, deprecated and x-sunset as the 3.1 document', () => {
    expect(surface(openapi30)).toEqual(surface(openapi31));
    expect(Object.keys(openapi30.paths).length).toBeGreaterThan(0);
    // the scopes a 3.0 http security requirement cannot hold move to x-scopes
    for (const [route, item] of Object.entries<any>(openapi31.paths)) {
      for (const method of HTTP_METHODS) {
        if (!item[method]) continue;
        const scopes = item[method].security.flatMap((req: Record<string, string[]>) => Object.values(req).flat());
        // public routes (/healthz, /readyz) have no scope and no x-scopes
        expect([route, method, (openapi30 as any).paths[route][method]['x-scopes'] ?? []]).toEqual([route, method, scopes]);
      }
    }
  });

  it('down-converts every 3.1-only construct the converter leaves (fixture with each of them)', async () => {
    const converted: any = toOpenApi30(features31 as never);
    await expect(SwaggerParser.validate(structuredClone(converted))).resolves.toBeTruthy();
    expect(converted).not.toHaveProperty('webhooks');
    expect(converted).not.toHaveProperty('jsonSchemaDialect');
    expect(converted.info).toEqual({ title: features31.info.title, version: '1.0.0', license: { name: 'Proprietary' } });
    expect(converted['x-webhooks'].thingCreated.post.requestBody.content['application/json'].schema).toEqual({
      type: 'object', nullable: true, properties: { at: { type: 'string', enum: ['x'] } },
    });
    const op = converted.paths['/v1/things'].post;
    expect(op).toMatchObject({ deprecated: true, 'x-sunset': '2026-11-11', security: [{ bearerAuth: [] }], 'x-scopes': ['things:write'] });
    const p = converted.components.schemas.ThingCreate.properties;
    expect(p.weight).toEqual({ type: 'number', minimum: 0, exclusiveMinimum: true, maximum: 1000, exclusiveMaximum: true });
    expect(p.ratio).toEqual({ type: 'number', minimum: 0.5 }); // the inclusive bound is the stricter one
    expect(p.code).toEqual({ anyOf: [{ type: 'string' }, { type: 'integer' }] });
    expect(p.label).toEqual({ anyOf: [{ type: 'string', nullable: true }, { type: 'integer' }] });
    expect(p.note).toEqual({ type: 'string', nullable: true, example: 'hello' });
    expect(p.owner).toEqual({ nullable: true, allOf: [{ $ref: '#/components/schemas/Owner' }] });
    expect(p.backup).toEqual({ nullable: true, allOf: [{ $ref: '#/components/schemas/Owner' }] });
    expect(p.primary).toEqual({ description: 'A $ref with a sibling', allOf: [{ $ref: '#/components/schemas/Owner' }] });
    expect(p.enabled).toEqual({ type: 'boolean', enum: [false] });
    expect(p.tags).toEqual({ type: 'array', items: { type: 'string' } });
    expect(p.extra).toEqual({ type: 'object' });
    expect(converted.components.schemas.ThingCreate).not.toHaveProperty('dependentRequired');
    expect(converted.components.schemas.ThingCreate).not.toHaveProperty('if');
    expect(converted.components.schemas.Nothing).toEqual({ nullable: true, enum: [null] });
  });
});

type Schemas = components['schemas'];

interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

/** The calls of the field workflow; each SDK under test implements them its own way. */
interface FieldWorkflowClient {
  createSite(body: Schemas['SiteCreate'], idempotencyKey?: string): Promise<Reply>;
  createUser(body: Schemas['UserCreate']): Promise<Reply>;
  createCheckin(body: Schemas['CheckinCreate']): Promise<Reply>;
  updateCheckin(id: string, body: Schemas['CheckinUpdate']): Promise<Reply>;
  createLog(body: Schemas['LogCreate']): Promise<Reply>;
  ingestSensorReadings(body: Schemas['SensorReadingBatch']): Promise<Reply>;
  listSensorReadings(query: NonNullable<paths['/v1/sensor-readings']['get']['parameters']['query']>): Promise<Reply>;
  /** The status each feed event of one check-in carries, read from `data` narrowed by `type` (the client's types must allow that). */
  checkinStatusesInFeed(checkinId: string): Promise<(string | undefined)[]>;
}

/** As a client typed by generated/client-types.ts reads a feed event: `data` narrowed by `type` (a CheckinStatus, not unknown). */
function checkinStatusOf(event: components['schemas']['Event']): components['schemas']['CheckinStatus'] | undefined {
  switch (event.type) {
    case 'checkin.created':
    case 'checkin.activated':
    case 'checkin.checked_out':
    case 'checkin.updated':
      return event.data.status;
    default:
      return undefined;
  }
}

/** Type-checked by `tsc --noEmit` (part of npm test), not run: the rest of what narrowing gives a client of the 3.1 types (as test/fixtures/sdk/heyApiWorkflowClient.ts checks for the SDK). */
export function typedEventChecks(event: components['schemas']['Event'], delivered: components['schemas']['IntegrationEvent']): unknown[] {
  const seen: unknown[] = [];
  if (event.type === 'issue.updated') {
    const changed: string[] = event.changedFields;
    seen.push(changed, event.data.status, event.previousValues);
  }
  if (event.type === 'site.deleted') {
    const gone: true = event.data.deleted;
    seen.push(gone);
  }
  if (event.type === 'checkin.activated') {
    // @ts-expect-error -- a Checkin has no field `stauts`: a misspelling does not compile
    seen.push(event.data.stauts);
  }
  if (delivered.type === 'sensor_readings.ingested') {
    const stored: number = delivered.data.ingested;
    seen.push(stored, delivered.timestamp);
  }
  return seen;
}

/**
 * The field workflow of the README, through a client: a site and a user, a check-in from
 * pre_checkin to active (with coordinates) to checked_out, a log entry on it, a batch of
 * readings paged through, and a retried create replayed by its Idempotency-Key.
 */
async function runFieldWorkflow(api: FieldWorkflowClient): Promise<void> {
  const run = randomBytes(4).toString('hex');
  const place = { latitude: 53.8008, longitude: -1.5491 };

  const site = await api.createSite({ name: `Substation ${run}`, ...place, geofenceRadiusMeters: 150 });
  expect(site.status).toBe(201);
  expect(site.body).toMatchObject({ id: anId('site'), name: `Substation ${run}`, geofenceRadiusMeters: 150 });
  expect(site.headers.get('location')).toBe(`/v1/sites/${site.body.id}`);
  const siteId: string = site.body.id;

  const user = await api.createUser({ userId: `inspector-${run}` });
  expect(user.status).toBe(201);
  expect(user.body).toMatchObject({ userId: `inspector-${run}`, createdAt: aTimestamp() });

  const planned = await api.createCheckin({ userId: `inspector-${run}`, siteId, status: 'pre_checkin' });
  expect(planned.status).toBe(201);
  expect(planned.body).toMatchObject({ status: 'pre_checkin', userId: `inspector-${run}`, siteId });
  const checkinId: string = planned.body.id;

  const active = await api.updateCheckin(checkinId, { status: 'active', coordinates: { ...place, accuracyMeters: 8 }, checkInAddress: '1 Grid Road, Leeds' });
  expect(active.status).toBe(200);
  expect(active.body).toMatchObject({ id: checkinId, status: 'active', checkedInAt: aTimestamp(), withinGeofence: true, suspicious: false });

  const out = await api.updateCheckin(checkinId, { status: 'checked_out', checkOutAddress: '1 Grid Road, Leeds' });
  expect(out.status).toBe(200);
  expect(out.body).toMatchObject({ status: 'checked_out', checkedOutAt: aTimestamp() });
  // the change feed, as a client reads it: each event's data typed by its type
  expect(await api.checkinStatusesInFeed(checkinId)).toEqual(['pre_checkin', 'active', 'checked_out']);

  const log = await api.createLog({ entityType: 'checkin', entityId: checkinId, entryType: 'comment', source: 'api', message: 'Transformer inspected, no findings.' });
  expect(log.status).toBe(201);
  expect(log.body).toMatchObject({ entityType: 'checkin', entityId: checkinId, entryType: 'comment', source: 'api' });

  const readings = Array.from({ length: 5 }, (_, i) => ({
    provider: 'acme', sensorExternalId: `sensor-${run}`, siteId, metric: 'temperature_c', value: 20 + i, unit: 'C',
    occurredAt: new Date(Date.UTC(2026, 10, 22, 4, i)).toISOString(),
  }));
  const ingested = await api.ingestSensorReadings({ readings });
  expect(ingested.status).toBe(201);
  expect(ingested.body).toMatchObject({ ingested: 5, duplicates: 0 });
  expect(ingested.body.data).toHaveLength(5);

  const seen: number[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 10; page++) {
    const list = await api.listSensorReadings({ siteId, limit: 2, ...(cursor ? { cursor } : {}) });
    expect(list.status).toBe(200);
    seen.push(...list.body.data.map((r: { value: number }) => r.value));
    cursor = list.body.nextCursor ?? undefined;
    if (!cursor) break;
  }
  expect(seen).toEqual([20, 21, 22, 23, 24]);

  const key = `retry-${run}`;
  const first = await api.createSite({ name: `Depot ${run}`, geofenceRadiusMeters: 100 }, key);
  const retried = await api.createSite({ name: `Depot ${run}`, geofenceRadiusMeters: 100 }, key);
  expect(first.status).toBe(201);
  expect(first.headers.get('idempotent-replayed')).toBeNull();
  expect(retried.status).toBe(201);
  expect(retried.body).toEqual(first.body);
  expect(retried.headers.get('idempotent-replayed')).toBe('true');
  expect(retried.headers.get('location')).toBe(first.headers.get('location'));
  const reused = await api.createSite({ name: `Other ${run}`, geofenceRadiusMeters: 100 }, key);
  expect(reused.status).toBe(409);
  expect(reused.body).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
}

/** fetch that hands every exchange to the contract check, as supertest requests are. */
const recordingFetch: typeof fetch = async (input, init) => {
  const request = new Request(input, init);
  const response = await fetch(request);
  const text = await response.clone().text();
  const json = /^application\/json\b/.test(response.headers.get('content-type') ?? '');
  recordExchange({
    method: request.method, url: request.url, status: response.status,
    headers: Object.fromEntries(response.headers), body: text === '' ? undefined : json ? JSON.parse(text) : text,
  });
  return response;
};

/**
 * The SDK a client author gets: generated from the served /openapi-sdk.json with the command
 * the README gives ("Use the API from your code"), compiled with tsc --strict together with the workflow's calls
 * (test/fixtures/sdk/heyApiWorkflowClient.ts). Done once per test file.
 */
let heyApiSdk: Promise<string> | undefined;
async function buildHeyApiSdk(baseUrl: string): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-sdk-'));
  await run('npx', ['@hey-api/openapi-ts', '-i', `${baseUrl}/openapi-sdk.json`, '-o', path.join(dir, 'client'), '--no-log-file'], { cwd: root, timeout: 60_000 });
  fs.copyFileSync(path.join(__dirname, 'fixtures/sdk/heyApiWorkflowClient.ts'), path.join(dir, 'heyApiWorkflowClient.ts'));
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { target: 'ES2022', module: 'commonjs', moduleResolution: 'node', lib: ['ES2022', 'DOM', 'DOM.Iterable'], strict: true, outDir: 'dist', skipLibCheck: true, types: [] },
    include: ['client', 'heyApiWorkflowClient.ts'],
  }));
  try {
    await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')], { cwd: dir, timeout: 60_000 });
  } catch (err) {
    throw new Error(`The generated SDK does not compile:\n${(err as { stdout?: string }).stdout ?? err}`);
  }
  return dir;
}

afterAll(async () => {
  if (heyApiSdk) fs.rmSync(await heyApiSdk.catch(() => ''), { recursive: true, force: true });
});

describeEachDatabase('the field workflow through generated clients', (t: TestContext) => {
  let server: http.Server;
  let baseUrl: string;
  let apiKey: string;

  beforeAll(async () => {
    server = http.createServer(t.app.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    apiKey = t.auth.replace(/^Bearer /, '');
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('serves /openapi-sdk.json and /openapi.json exactly as generated', async () => {
    expect((await t.http.get('/openapi-sdk.json').expect(200)).body).toEqual(openapi30);
    expect((await t.http.get('/openapi.json').expect(200)).body).toEqual(openapi31);
  });

  it('with PUBLIC_BASE_URL, both documents name that URL as their only server, and are otherwise as generated', async () => {
    const deployed = t.anotherApp({ PUBLIC_BASE_URL: 'https://fieldops.example.com/' });
    try {
      const servers = [{ url: 'https://fieldops.example.com', description: 'This deployment (PUBLIC_BASE_URL)' }];
      expect((await deployed.http.get('/openapi-sdk.json').expect(200)).body).toEqual({ ...openapi30, servers });
      expect((await deployed.http.get('/openapi.json').expect(200)).body).toEqual({ ...openapi31, servers });
      // what the server validates against is the contract, not the served copy
      expect(openapi31.servers).toEqual([{ url: 'http://127.0.0.1:8080', description: expect.any(String) }]);
    } finally {
      await deployed.close();
    }
  });

  it('runs through an SDK generated by @hey-api/openapi-ts from /openapi-sdk.json', async () => {
    heyApiSdk ??= buildHeyApiSdk(baseUrl);
    const dir = await heyApiSdk;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { heyApiWorkflowClient } = require(path.join(dir, 'dist/heyApiWorkflowClient.js'));
    await runFieldWorkflow(heyApiWorkflowClient(baseUrl, apiKey, recordingFetch) as FieldWorkflowClient);
  }, 90_000);

  it('the README\'s ES-module set-up: the SDK generated with .js import extensions compiles under module nodenext and runs in node', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-sdk-esm-'));
    try {
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
      // the README's openapi-ts.config.mjs, reading the served document
      fs.writeFileSync(path.join(dir, 'openapi-ts.config.mjs'), `export default { input: '${baseUrl}/openapi-sdk.json', output: { path: 'src/fieldops', importFileExtension: '.js' } };\n`);
      await run(path.join(root, 'node_modules/.bin/openapi-ts'), ['--no-log-file'], { cwd: dir, timeout: 60_000 }); // npx in the client's folder
      fs.copyFileSync(path.join(__dirname, 'fixtures/sdk/esmFlow.ts'), path.join(dir, 'src', 'flow.ts'));
      fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'nodenext', moduleResolution: 'nodenext', lib: ['ES2022', 'DOM'], strict: true, outDir: 'dist', skipLibCheck: true, types: ['node'], typeRoots: [path.join(root, 'node_modules/@types')] },
        include: ['src'],
      }));
      try {
        await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')], { cwd: dir, timeout: 60_000 });
      } catch (err) {
        throw new Error(`The ES-module SDK does not compile:\n${(err as { stdout?: string }).stdout ?? err}`);
      }
      const { stdout } = await run(process.execPath, [path.join(dir, 'dist', 'flow.js')], { cwd: dir, timeout: 30_000, env: { ...process.env, FIELDOPS_URL: baseUrl, FIELDOPS_API_KEY: apiKey } });
      expect(JSON.parse(stdout)).toEqual({ status: 'active', withinGeofence: true });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('runs through openapi-fetch typed with the 3.1 client types (generated/client-types.ts)', async () => {
    const client = createOpenApiFetchClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` }, fetch: recordingFetch });
    const reply = async (call: Promise<{ data?: unknown; error?: unknown; response: Response }>): Promise<Reply> => {
      const { data, error, response } = await call;
      return { status: response.status, body: data ?? error, headers: response.headers };
    };
    const idempotency = (key?: string) => (key ? { 'Idempotency-Key': key } : {});
    await runFieldWorkflow({
      createSite: (body, key) => reply(client.POST('/v1/sites', { body, params: { header: idempotency(key) } })),
      createUser: (body) => reply(client.POST('/v1/users', { body })),
      createCheckin: (body) => reply(client.POST('/v1/checkins', { body })),
      updateCheckin: (id, body) => reply(client.PATCH('/v1/checkins/{id}', { params: { path: { id } }, body })),
      createLog: (body) => reply(client.POST('/v1/logs', { body })),
      ingestSensorReadings: (body) => reply(client.POST('/v1/sensor-readings', { body })),
      listSensorReadings: (query) => reply(client.GET('/v1/sensor-readings', { params: { query } })),
      checkinStatusesInFeed: async (checkinId) => {
        const { data } = await client.GET('/v1/events', { params: { query: { resourceId: checkinId } } });
        return data!.data.map(checkinStatusOf);
      },
    });
  });
});
