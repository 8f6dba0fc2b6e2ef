import { describeEachDatabase, anId, aTimestamp, Method, TestContext } from './support/testApp';
import { FIXTURE_ENV, fixtureClient, fixtures, implementedWrites, Read, WriteRequest } from './support/writeFixtures';
import type { EventType } from '../runtime/domain/eventTypes';
import { createIssue } from '../runtime/domain/issues';

// Every write operation records its event(s) in the write's transaction (runtime/domain/events.ts):
// for each one of test/support/writeFixtures.ts, exactly the events listed below, whose `data` is
// the resource as GET answers it afterwards (a tombstone for a delete), with `changedFields` on
// updates equal to the fields whose value GET shows changed. A new write operation fails
// "has an event expectation for every write operation" until it is listed here.

interface ExpectedEvent {
  type: EventType;
  /** Where GET reads the resource: default the write's Location (POST) or its path (PATCH). */
  of?: (read: Read, request: WriteRequest) => Promise<string>;
  /** Update events: the fields the fixture's write changes. */
  changedFields?: string[];
  /** `data` is neither a resource nor a tombstone: builds what it must equal. */
  data?: (read: Read, response: { body: any }) => Promise<object>;
}

const tombstone = (type: EventType): ExpectedEvent => ({ type });
const LAST_LOCATION = ['lastLocationAccuracyMeters', 'lastLocationCapturedAt', 'lastLocationLat', 'lastLocationLng', 'lastLocationSource'];
const userOf = (userId: string) => async (read: Read) => `/v1/users/${(await read(`/v1/users?userId=${encodeURIComponent(userId)}`)).data[0].id}`;
const runOfCompletion = async (_read: Read, request: WriteRequest) => request.path.replace(/\/complete$/, '');

/** Per write operationId: the events one successful request records, in order. Configuration writes record none. */
const expectedEvents: Record<string, ExpectedEvent[]> = {
  createSite: [{ type: 'site.created' }],
  updateSite: [{ type: 'site.updated', changedFields: ['geofenceRadiusMeters'] }],
  deleteSite: [tombstone('site.deleted')],

  createUser: [{ type: 'user.created' }],
  updateUser: [{ type: 'user.updated', changedFields: LAST_LOCATION }],

  // the fixture's user has no profile: no last location to move
  createCheckin: [{ type: 'checkin.created' }],
  // activation with a position moves the profile's last location: its event follows the check-in's
  updateCheckin: [
    { type: 'checkin.activated', changedFields: ['checkInAddress', 'checkedInAt', 'coordinates', 'distanceFromSiteMeters', 'geofenceStatus', 'status', 'suspicionReasons', 'suspicious', 'withinGeofence'] },
    { type: 'user.updated', of: userOf('replay|checkin-update'), changedFields: [...LAST_LOCATION, 'lastLocationCheckinId', 'lastLocationSiteId'].sort() },
  ],

  createLog: [{ type: 'log.created' }],
  ingestSensorReadings: [{
    type: 'sensor_readings.ingested',
    data: async (read, response) => ({
      ingested: 2,
      duplicates: 0,
      data: await Promise.all(response.body.data.map((reading: { id: string }) => read(`/v1/sensor-readings/${reading.id}`))),
    }),
  }],

  createAsset: [{ type: 'asset.created' }],
  updateAsset: [{ type: 'asset.updated', changedFields: ['serialNumber'] }],
  deleteAsset: [tombstone('asset.deleted')],

  createIssue: [{ type: 'issue.created' }],
  updateIssue: [{ type: 'issue.resolved', changedFields: ['resolvedAt', 'status'] }],

  createTemplate: [{ type: 'template.created' }],
  updateTemplate: [{ type: 'template.updated', changedFields: ['name', 'version'] }],
  deleteTemplate: [tombstone('template.deleted')],

  createSchedule: [{ type: 'schedule.created' }],
  updateSchedule: [{ type: 'schedule.updated', changedFields: ['durationMinutes'] }],
  deleteSchedule: [tombstone('schedule.deleted')],

  createRun: [{ type: 'run.started' }],
  updateRun: [{ type: 'run.updated', changedFields: ['answers'] }],
  completeRun: [{ type: 'run.completed', of: runOfCompletion, changedFields: ['completedAt', 'failedItemIds', 'score', 'status'] }],

  createIntegrationSubscription: [],
  updateIntegrationSubscription: [],
  deleteIntegrationSubscription: [],
  rotateIntegrationSubscriptionSecret: [],
  pingIntegrationSubscription: [],
  retryIntegrationSubscriptionDelivery: [],
  replayIntegrationSubscriptionEvents: [],
};

describe('event expectations', () => {
  it('has an event expectation (and a fixture) for every write operation', () => {
    expect(implementedWrites.filter((op) => !expectedEvents[op.operationId] || !fixtures[op.operationId]).map((op) => op.operationId)).toEqual([]);
  });
});

/** The names of the top-level fields whose value differs (JSON equality), without updatedAt. */
function diff(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  return [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((name) => name !== 'updatedAt' && JSON.stringify(before[name]) !== JSON.stringify(after[name]))
    .sort();
}

/** A client of one organization: the fixtures' helpers and the feed. */
function clientOf(t: TestContext, auth: string) {
  const { send, create, read } = fixtureClient(t, auth);
  /** Every event after `cursor` (from the start without one), and the cursor to resume from. */
  const eventsAfter = async (cursor?: string): Promise<{ events: any[]; cursor: string }> => {
    const events: any[] = [];
    for (;;) {
      const page = await read(`/v1/events?limit=500${cursor ? `&after=${cursor}` : ''}`);
      events.push(...page.data);
      cursor = page.nextCursor as string;
      if (!page.data.length) return { events, cursor };
    }
  };
  return { auth, send, create, read, eventsAfter };
}

describeEachDatabase('the events of every write operation', (t) => {
  it.each(implementedWrites.map((op) => [op.operationId, op] as const))('%s', async (operationId, op) => {
    const fixture = fixtures[operationId];
    const expected = expectedEvents[operationId];
    if (!fixture || !expected) return; // reported by "has an event expectation for every write operation"
    const client = clientOf(t, await t.newKey({ organization: `events-${operationId}` }));
    const request = await fixture(client.create, client.read);
    const method = op.method as Method;
    const defaultOf = async () => request.path;
    const before = await Promise.all(
      expected.map(async (e) => (e.changedFields ? client.read(await (e.of ?? defaultOf)(client.read, request)) : undefined)),
    );
    const { cursor } = await client.eventsAfter();

    const response = await client.send(method, request, `events-${operationId}`);
    if (response.status < 200 || response.status >= 300) {
      throw new Error(`the fixture's request must succeed; ${op.method.toUpperCase()} ${request.path} answered ${response.status}: ${JSON.stringify(response.body)}`);
    }
    const { events, cursor: end } = await client.eventsAfter(cursor);

    const wanted = await Promise.all(expected.map(async (e, i) => {
      let data: object;
      if (e.data) data = await e.data(client.read, response);
      else if (method === 'delete') data = { id: request.path.split('/').pop(), deleted: true };
      else data = await client.read(e.of ? await e.of(client.read, request) : method === 'post' ? response.headers.location : request.path);
      const changed = before[i] && diff(before[i], data as Record<string, unknown>);
      return {
        id: anId('evt'),
        type: e.type,
        sequence: expect.any(Number),
        occurredAt: aTimestamp(),
        data,
        // …and each one's value before it, as GET showed it then
        ...(e.changedFields ? { changedFields: changed, previousValues: Object.fromEntries((changed as string[]).map((name) => [name, (before[i] as Record<string, unknown>)[name] ?? null])) } : {}),
      };
    }));
    expect(events).toEqual(wanted);
    // the fixture's list names what the write changes, and GET agrees with it
    expect(wanted.map((w) => w.changedFields)).toEqual(expected.map((e) => e.changedFields));

    // an idempotent replay records nothing new
    const again = await client.send(method, request, `events-${operationId}`);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await client.eventsAfter(end)).events).toEqual([]);
  });
}, FIXTURE_ENV);

/** PATCHes whose same request sent again still changes the resource, each for its reason. */
const ALWAYS_CHANGES: Record<string, string> = { updateTemplate: 'every update of a template makes a new version' };

describeEachDatabase('an update sent again changes nothing', (t) => {
  // a mirror built from events stays equal to GET: the second request records no event, and it
  // leaves the resource exactly as it was, updatedAt included (runtime/domain/events.ts, finishUpdate)
  it.each(implementedWrites.filter((op) => op.method === 'patch' && !ALWAYS_CHANGES[op.operationId]).map((op) => [op.operationId] as const))('%s', async (operationId) => {
    const client = clientOf(t, await t.newKey({ organization: `events-again-${operationId}` }));
    const request = await fixtures[operationId](client.create, client.read);
    const first = await client.send('patch', request);
    expect(first.status).toBe(200);
    const { cursor } = await client.eventsAfter();
    await new Promise((resolve) => setTimeout(resolve, 5)); // a moved updatedAt would differ
    const again = await client.send('patch', request);
    expect([again.status, again.body]).toEqual([200, first.body]);
    expect(await client.read(request.path)).toEqual(first.body);
    expect((await client.eventsAfter(cursor)).events).toEqual([]);
  });
}, FIXTURE_ENV);

describeEachDatabase('which writes record no event, or another type', (t) => {
  const orgIdOf = async (name: string): Promise<string> => (await t.db.knex('organizations').where({ name }).first()).id;

  it('an update that changes no field records nothing; one that does records only what changed', async () => {
    const client = clientOf(t, await t.newKey({ organization: 'events-noop' }));
    const site = await client.create('/v1/sites', { name: 'Same', geofenceRadiusMeters: 100 });
    const assetId = await client.create('/v1/assets', { name: 'Pump', serialNumber: 'P-1' });
    const { cursor } = await client.eventsAfter();
    await client.create(`/v1/sites/${site}`, { name: 'Same', geofenceRadiusMeters: 100 }, 'patch');
    await client.create(`/v1/assets/${assetId}`, { serialNumber: 'P-1' }, 'patch');
    expect((await client.eventsAfter(cursor)).events).toEqual([]);
    await client.create(`/v1/sites/${site}`, { name: 'Same', geofenceRadiusMeters: 120 }, 'patch');
    expect((await client.eventsAfter(cursor)).events.map((e) => [e.type, e.changedFields])).toEqual([['site.updated', ['geofenceRadiusMeters']]]);
  });

  it('a template update always makes a new version, so it always records template.updated', async () => {
    const client = clientOf(t, await t.newKey({ organization: 'events-template' }));
    const template = { name: 'Monthly walk', items: [{ id: 'fence', label: 'Fence intact', type: 'yes_no' }] };
    const id = await client.create('/v1/templates', template);
    const { cursor } = await client.eventsAfter();
    await client.create(`/v1/templates/${id}`, { name: 'Monthly walk' }, 'patch'); // the same name again
    const { events } = await client.eventsAfter(cursor);
    expect(events.map((e) => [e.type, e.changedFields])).toEqual([['template.updated', ['version']]]);
    expect(events[0].data).toMatchObject({ id, name: 'Monthly walk', version: 2 });
  });

  it('issues: resolved and closed have their own types, reopening is an update', async () => {
    const client = clientOf(t, await t.newKey({ organization: 'events-issues' }));
    const id = await client.create('/v1/issues', { title: 'Leak' });
    const { cursor } = await client.eventsAfter();
    for (const change of [{ status: 'in_progress' }, { status: 'resolved' }, { status: 'closed' }, { status: 'open' }, { status: 'closed', priority: 'low' }]) {
      await client.create(`/v1/issues/${id}`, change, 'patch');
    }
    expect((await client.eventsAfter(cursor)).events.map((e) => [e.type, e.changedFields])).toEqual([
      ['issue.updated', ['status']],
      ['issue.resolved', ['resolvedAt', 'status']],
      ['issue.closed', ['closedAt', 'status']],
      ['issue.updated', ['closedAt', 'resolvedAt', 'status']],
      ['issue.closed', ['closedAt', 'priority', 'status']],
    ]);
  });

  it('a batch of readings records the ones it stored; a batch of only duplicates records nothing', async () => {
    const client = clientOf(t, await t.newKey({ organization: 'events-readings' }));
    const reading = (value: number, minute: number) => ({ provider: 'acme', sensorExternalId: 's-1', siteId: 'site_x', metric: 'temp', value, unit: 'C', occurredAt: `2026-11-22T04:${String(minute).padStart(2, '0')}:00Z` });
    await t.http.post('/v1/sensor-readings').set('Authorization', client.auth).send({ readings: [reading(1, 0)] }).expect(201);
    const { cursor } = await client.eventsAfter();
    const mixed = (await t.http.post('/v1/sensor-readings').set('Authorization', client.auth).send({ readings: [reading(1, 0), reading(2, 1), reading(2, 1)] }).expect(201)).body;
    expect({ ingested: mixed.ingested, duplicates: mixed.duplicates }).toEqual({ ingested: 1, duplicates: 2 });
    const { events, cursor: end } = await client.eventsAfter(cursor);
    expect(events.map((e) => e.data)).toEqual([{ ingested: 1, duplicates: 2, data: [await client.read(`/v1/sensor-readings/${mixed.data[1].id}`)] }]);
    await t.http.post('/v1/sensor-readings').set('Authorization', client.auth).send({ readings: [reading(1, 0), reading(2, 1)] }).expect(201);
    expect((await client.eventsAfter(end)).events).toEqual([]);
  });

  it('a check-in with a position moves the last location of a profile: user.updated follows checkin.created', async () => {
    const client = clientOf(t, await t.newKey({ organization: 'events-location' }));
    const userId = await client.create('/v1/users', { userId: 'auth0|loc' });
    const { cursor } = await client.eventsAfter();
    const checkin = await client.create('/v1/checkins', { userId: 'auth0|loc', siteId: 'site_elsewhere', coordinates: { latitude: 53.8, longitude: -1.55 } });
    const events = (await client.eventsAfter(cursor)).events;
    expect(events.map((e) => [e.type, e.data.id])).toEqual([['checkin.created', checkin], ['user.updated', userId]]);
    expect(events[1].data).toEqual(await client.read(`/v1/users/${userId}`));
    expect(events[1].changedFields).toEqual(['lastLocationCapturedAt', 'lastLocationCheckinId', 'lastLocationLat', 'lastLocationLng', 'lastLocationSiteId', 'lastLocationSource']);
    expect(events[0].sequence).toBeLessThan(events[1].sequence);
  });

  it('a write that fails after recording its event leaves neither the issue nor the event', async () => {
    await t.newKey({ organization: 'events-rollback' });
    const orgId = await orgIdOf('events-rollback');
    await expect(t.db.knex.transaction(async (trx) => {
      await createIssue(trx, orgId, { title: 'Never raised', status: 'open', priority: 'medium' });
      expect(await trx('events').where({ org_id: orgId }).select('type')).toEqual([{ type: 'issue.created' }]);
      throw new Error('a later statement failed');
    })).rejects.toThrow('a later statement failed');
    expect(await t.db.knex('events').where({ org_id: orgId }).select('id')).toEqual([]);
    expect(await t.db.knex('issues').where({ org_id: orgId }).select('id')).toEqual([]);
  });
});
