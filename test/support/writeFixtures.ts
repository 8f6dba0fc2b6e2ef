import fs from 'node:fs';
import path from 'node:path';
import type { Method, TestContext } from './testApp';
import { operations, OperationInfo } from '../../generated/operations';

// One successful request per write operation of the contract, with what it needs created first.
// Shared by the tests that must cover every write (idempotent replay, the event of each write):
// `implementedWrites` comes from the contract (generated/operations.ts), so a new write operation
// whose handler is no longer the generated stub fails those tests until it gets a fixture here.

export interface WriteRequest {
  path: string;
  body?: object;
}

/** For setup: sends a request (POST unless told) that must succeed, and answers its body's `id`. */
export type Create = (path: string, body: object, method?: Method) => Promise<string>;

/** For setup: a GET that must succeed, answering its body. */
export type Read = (path: string) => Promise<any>;

/** The fixtures' helpers for one API key: `send` a write (with an Idempotency-Key if given), `create`, `read`. */
export function fixtureClient(t: TestContext, auth: string) {
  const send = (method: Method, request: WriteRequest, key?: string) => {
    let req = t.http[method](request.path).set('Authorization', auth);
    if (key) req = req.set('Idempotency-Key', key);
    return request.body === undefined ? req : req.send(request.body);
  };
  const create: Create = async (url, body, method = 'post') => {
    const res = await send(method, { path: url, body });
    if (res.status >= 300) throw new Error(`setup ${method.toUpperCase()} ${url} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body.id;
  };
  const read: Read = async (url) => {
    const res = await t.http.get(url).set('Authorization', auth);
    if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  };
  return { send, create, read };
}

// Webhook targets: a public address literal, so that subscribing needs no DNS (nothing is sent: no worker runs here).
const HOOKS = 'https://93.184.215.14/hooks';
// …but a ping is sent at once: its subscription's target is a local port where nothing listens
// (refused at once, and nothing leaves the machine), which the suites allow with FIXTURE_ENV.
const NOBODY_LISTENING = 'http://127.0.0.1:1/hooks';

/** The settings of the suites that run the fixtures: the ping's local target is allowed. */
export const FIXTURE_ENV: NodeJS.ProcessEnv = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
const subscriptions = '/v1/integrations/webhooks/subscriptions';

/** Per operationId: prepares what the request needs and answers the request to replay. */
export const fixtures: Record<string, (create: Create, read: Read) => Promise<WriteRequest>> = {
  createSite: async () => ({ path: '/v1/sites', body: { name: 'Replay site', latitude: 53.8, longitude: -1.55, geofenceRadiusMeters: 150 } }),
  updateSite: async (create) => ({ path: `/v1/sites/${await create('/v1/sites', { name: 'To update' })}`, body: { geofenceRadiusMeters: 250 } }),
  deleteSite: async (create) => ({ path: `/v1/sites/${await create('/v1/sites', { name: 'To delete' })}` }),

  createUser: async () => ({ path: '/v1/users', body: { userId: 'replay|create', lastLocationSource: 'manual', lastLocationCapturedAt: '2026-11-22T04:19:50+01:00' } }),
  updateUser: async (create) => ({
    path: `/v1/users/${await create('/v1/users', { userId: 'replay|update' })}`,
    body: { lastLocationLat: 53.8012, lastLocationLng: -1.5485, lastLocationAccuracyMeters: 12, lastLocationSource: 'device', lastLocationCapturedAt: '2026-11-22T08:02:11Z' },
  }),

  createCheckin: async (create) => ({
    path: '/v1/checkins',
    body: {
      userId: 'replay|checkin',
      siteId: await create('/v1/sites', { name: 'Check-in site', latitude: 53.8, longitude: -1.55, geofenceRadiusMeters: 150 }),
      arrivalWindowStartAt: '2026-11-22T08:00:00Z',
      arrivalWindowEndAt: '2026-11-22T09:00:00Z',
    },
  }),
  updateCheckin: async (create) => {
    const siteId = await create('/v1/sites', { name: 'Check-in site 2', latitude: 53.8, longitude: -1.55, geofenceRadiusMeters: 150 });
    await create('/v1/users', { userId: 'replay|checkin-update' });
    const checkinId = await create('/v1/checkins', { userId: 'replay|checkin-update', siteId });
    return {
      path: `/v1/checkins/${checkinId}`,
      body: { status: 'active', coordinates: { latitude: 53.8001, longitude: -1.5501, accuracyMeters: 8 }, checkInAddress: '1 Grid Road' },
    };
  },

  createLog: async () => ({ path: '/v1/logs', body: { entityType: 'site', entityId: 'site_replay', entryType: 'note', message: 'Replayed once' } }),

  ingestSensorReadings: async () => ({
    path: '/v1/sensor-readings',
    body: {
      readings: [
        { provider: 'acme-iot', sensorExternalId: 'th-1', siteId: 'site_replay', metric: 'temperature_c', value: 21.4, unit: 'C', occurredAt: '2026-11-22T04:00:00Z' },
        { provider: 'acme-iot', sensorExternalId: 'th-1', siteId: 'site_replay', metric: 'humidity_pct', value: 48, unit: '%', occurredAt: '2026-11-22T05:00:00+01:00' },
      ],
    },
  }),

  createAsset: async () => ({ path: '/v1/assets', body: { name: 'Replay asset', assetType: 'transformer', serialNumber: 'TX-1', attributes: { ratingKva: '500' } } }),
  updateAsset: async (create) => ({ path: `/v1/assets/${await create('/v1/assets', { name: 'Asset to update' })}`, body: { serialNumber: 'TX-2' } }),
  deleteAsset: async (create) => ({ path: `/v1/assets/${await create('/v1/assets', { name: 'Asset to delete' })}` }),

  createIssue: async () => ({ path: '/v1/issues', body: { title: 'Replay issue', description: 'Oil on the floor', priority: 'high' } }),
  updateIssue: async (create) => ({ path: `/v1/issues/${await create('/v1/issues', { title: 'Issue to update' })}`, body: { status: 'resolved' } }),

  createTemplate: async () => ({ path: '/v1/templates', body: template('Replay template') }),
  updateTemplate: async (create) => ({ path: `/v1/templates/${await create('/v1/templates', template('Template to update'))}`, body: { name: 'Renamed template' } }),
  deleteTemplate: async (create) => ({ path: `/v1/templates/${await create('/v1/templates', template('Template to delete'))}` }),

  createSchedule: async (create) => ({ path: '/v1/schedules', body: await schedule(create, 'Replay schedule') }),
  updateSchedule: async (create) => ({ path: `/v1/schedules/${await create('/v1/schedules', await schedule(create, 'Schedule to update'))}`, body: { durationMinutes: 90 } }),
  deleteSchedule: async (create) => ({ path: `/v1/schedules/${await create('/v1/schedules', await schedule(create, 'Schedule to delete'))}` }),

  createRun: async (create) => ({ path: '/v1/runs', body: await run(create, 'Replay run') }),
  updateRun: async (create) => ({ path: `/v1/runs/${await create('/v1/runs', await run(create, 'Run to update'))}`, body: { answers: { 'fence-intact': true } } }),
  completeRun: async (create) => {
    const runId = await create('/v1/runs', await run(create, 'Run to complete'));
    await create(`/v1/runs/${runId}`, { answers: { 'fence-intact': true } }, 'patch');
    return { path: `/v1/runs/${runId}/complete` };
  },

  createIntegrationSubscription: async () => ({ path: subscriptions, body: { targetUrl: `${HOOKS}/create`, triggerKey: 'checkin.activated' } }),
  updateIntegrationSubscription: async (create) => ({
    path: `${subscriptions}/${await create(subscriptions, { targetUrl: `${HOOKS}/pause`, triggerKey: 'checkin.created' })}`,
    body: { status: 'paused' },
  }),
  deleteIntegrationSubscription: async (create) => ({ path: `${subscriptions}/${await create(subscriptions, { targetUrl: `${HOOKS}/delete`, eventTypes: ['site.deleted'] })}` }),
  rotateIntegrationSubscriptionSecret: async (create) => ({
    path: `${subscriptions}/${await create(subscriptions, { targetUrl: `${HOOKS}/rotate`, triggerKey: 'checkin.created' })}/rotate-secret`,
  }),
  pingIntegrationSubscription: async (create) => ({
    path: `${subscriptions}/${await create(subscriptions, { targetUrl: `${NOBODY_LISTENING}/ping`, triggerKey: 'checkin.created' })}/pings`,
  }),
  retryIntegrationSubscriptionDelivery: async (create, read) => {
    const subscriptionId = await create(subscriptions, { targetUrl: `${HOOKS}/retry`, triggerKey: 'checkin.created' });
    await create('/v1/checkins', { userId: 'replay|retry', siteId: 'site_replay' });
    const deliveries = await read(`${subscriptions}/${subscriptionId}/deliveries`);
    return { path: `${subscriptions}/${subscriptionId}/deliveries/${deliveries.data[0].id}/retry` };
  },
  replayIntegrationSubscriptionEvents: async (create) => {
    const subscriptionId = await create(subscriptions, { targetUrl: `${HOOKS}/replay`, triggerKey: 'checkin.created' });
    await create('/v1/checkins', { userId: 'replay|replay', siteId: 'site_replay' });
    return { path: `${subscriptions}/${subscriptionId}/replays`, body: { from: '2020-01-01T00:00:00Z', to: '2100-01-01T00:00:00Z' } };
  },
};

function template(name: string) {
  return { name, items: [{ id: 'fence-intact', label: 'Perimeter fence intact', type: 'yes_no', required: true }] };
}

async function schedule(create: Create, name: string) {
  return {
    templateId: await create('/v1/templates', template(name)),
    siteId: await create('/v1/sites', { name }),
    timezone: 'Europe/London',
    startsAt: '2026-03-23T09:00:00',
    durationMinutes: 60,
    recurrence: 'FREQ=WEEKLY;BYDAY=MO',
  };
}

async function run(create: Create, name: string) {
  return { templateId: await create('/v1/templates', template(name)), siteId: await create('/v1/sites', { name }), userId: 'replay|runner' };
}

const WRITE_METHODS = ['post', 'put', 'patch', 'delete'];
const HANDLERS_DIR = path.join(__dirname, '..', '..', 'handlers');

/** A handler `npm run generate` stubbed answers 501 until someone writes it: nothing to replay. */
export function isImplemented(op: OperationInfo): boolean {
  const file = path.join(HANDLERS_DIR, `${op.operationId}.ts`);
  return fs.existsSync(file) && !fs.readFileSync(file, 'utf8').includes('notImplemented(');
}

export const implementedWrites = Object.values(operations).filter((op) => WRITE_METHODS.includes(op.method) && isImplemented(op));
