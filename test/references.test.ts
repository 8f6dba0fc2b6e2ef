import { describeEachDatabase, anError, TestContext } from './support/testApp';
import { newAsset, newRun, newSite } from './support/resources';

// A body field that names a site, asset, run or template must name a live one of the key's own
// organization: 400 VALIDATION_ERROR naming the field otherwise (docs/architecture.md, "Product rules").

type Kind = 'site' | 'asset' | 'run' | 'template';
const noun: Record<Kind, string> = { site: 'a site', asset: 'an asset', run: 'a run', template: 'a template' };

/** One resource of each kind in the key's organization, one in another organization, and deleted ones. */
interface World {
  mine: Record<Kind, string>;
  foreign: Record<Kind, string>;
  deleted: Partial<Record<Kind, string>>;
}

async function newTemplate(t: TestContext, auth = t.auth): Promise<string> {
  return (await t.http.post('/v1/templates').set('Authorization', auth)
    .send({ name: 'Walk-round', items: [{ id: 'ok', label: 'All in order', type: 'yes_no' }] }).expect(201)).body.id;
}

async function resources(t: TestContext, auth: string): Promise<Record<Kind, string>> {
  const site = (await newSite(t, auth)).id;
  return { site, asset: (await newAsset(t, auth)).id, run: (await newRun(t, auth, site)).id, template: await newTemplate(t, auth) };
}

/** A write whose body names resources: `base` is a valid body, `target` the path (creating what an update addresses). */
interface Write {
  operation: string;
  method: 'post' | 'patch';
  fields: Record<string, Kind>;
  base(w: World): object;
  target(t: TestContext, w: World): Promise<string>;
  /** The table the write stores into, to prove a refused write stored nothing. */
  table: string;
}

const issueBody = (w: World) => ({ title: 'Oil leak', siteId: w.mine.site, assetId: w.mine.asset, runId: w.mine.run });
const scheduleBody = (w: World) => ({ templateId: w.mine.template, siteId: w.mine.site, timezone: 'Europe/London', startsAt: '2026-03-16T09:00:00' });
const create = async (t: TestContext, path: string, body: object) => `${path}/${(await t.http.post(path).set('Authorization', t.auth).send(body).expect(201)).body.id}`;

const writes: Write[] = [
  { operation: 'createAsset', method: 'post', table: 'assets', fields: { '/siteId': 'site' }, base: (w) => ({ name: 'Pump', siteId: w.mine.site }), target: async () => '/v1/assets' },
  { operation: 'updateAsset', method: 'patch', table: 'assets', fields: { '/siteId': 'site' }, base: (w) => ({ siteId: w.mine.site }), target: (t) => create(t, '/v1/assets', { name: 'Pump' }) },
  { operation: 'createIssue', method: 'post', table: 'issues', fields: { '/siteId': 'site', '/assetId': 'asset', '/runId': 'run' }, base: issueBody, target: async () => '/v1/issues' },
  { operation: 'updateIssue', method: 'patch', table: 'issues', fields: { '/siteId': 'site', '/assetId': 'asset', '/runId': 'run' }, base: issueBody, target: (t) => create(t, '/v1/issues', { title: 'Leak' }) },
  {
    operation: 'createRun', method: 'post', table: 'runs', fields: { '/templateId': 'template', '/siteId': 'site', '/assetId': 'asset' },
    base: (w) => ({ templateId: w.mine.template, siteId: w.mine.site, assetId: w.mine.asset, userId: 'user-42' }), target: async () => '/v1/runs',
  },
  { operation: 'createSchedule', method: 'post', table: 'schedules', fields: { '/templateId': 'template', '/siteId': 'site' }, base: scheduleBody, target: async () => '/v1/schedules' },
  {
    operation: 'updateSchedule', method: 'patch', table: 'schedules', fields: { '/templateId': 'template', '/siteId': 'site' }, base: scheduleBody,
    // stored with other resources than `base` names, so that sending `base` changes (and checks) both
    target: async (t, w) => create(t, '/v1/schedules', { ...scheduleBody(w), templateId: await newTemplate(t), siteId: (await newSite(t)).id }),
  },
];

const cases = writes.flatMap((write) => Object.entries(write.fields).map(([pointer, kind]) => ({ ...write, pointer, kind })));

describeEachDatabase('references to resources of this API', (t) => {
  const w = {} as World;

  beforeAll(async () => {
    w.mine = await resources(t, t.auth);
    w.foreign = await resources(t, await t.newKey({ organization: 'references-foreign' }));
    const gone = await resources(t, t.auth);
    await t.http.delete(`/v1/sites/${gone.site}`).set('Authorization', t.auth).expect(204);
    await t.http.delete(`/v1/assets/${gone.asset}`).set('Authorization', t.auth).expect(204);
    await t.http.delete(`/v1/templates/${gone.template}`).set('Authorization', t.auth).expect(204);
    // runs have no delete
    w.deleted = { site: gone.site, asset: gone.asset, template: gone.template };
  });

  const send = (method: 'post' | 'patch', path: string, body: object) => t.http[method](path).set('Authorization', t.auth).send(body);

  describe.each(cases)('$operation $pointer', ({ method, base, target, pointer, kind, table }) => {
    const field = pointer.slice(1);
    const wrongIds = (): [string, string][] => [
      ['a made-up id', `${kind}_madeup0000000000000000000`],
      ['the string "null"', 'null'],
      ["another organization's id", w.foreign[kind]],
      ...(w.deleted[kind] ? [['a deleted resource\'s id', w.deleted[kind]] as [string, string]] : []),
    ];

    it('refuses a made-up id, "null", another organization\'s id and a deleted one with 400 naming the field, storing nothing', async () => {
      const path = await target(t, w);
      const before = method === 'patch' ? (await t.http.get(path).set('Authorization', t.auth).expect(200)).body : undefined;
      const count = Number((await t.db.knex(table).count({ n: '*' }))[0].n);
      for (const [what, id] of wrongIds()) {
        const res = await send(method, path, { ...base(w), [field]: id });
        expect({ what, status: res.status }).toEqual({ what, status: 400 });
        expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: pointer, message: `does not name ${noun[kind]} of this organization (got ${id})` }] }));
      }
      expect(Number((await t.db.knex(table).count({ n: '*' }))[0].n)).toBe(count);
      if (before) expect((await t.http.get(path).set('Authorization', t.auth).expect(200)).body).toEqual(before);
    });

    it('accepts one of the organization\'s own', async () => {
      const path = await target(t, w);
      const res = await send(method, path, base(w)).expect(method === 'post' ? 201 : 200);
      expect(res.body[field]).toBe(w.mine[kind]);
    });
  });

  it('names every wrong reference of a body at once', async () => {
    const res = await send('post', '/v1/issues', { title: 'Everything wrong', siteId: 'null', assetId: w.foreign.asset, runId: 'run_x' }).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', {
      details: [
        { path: '/siteId', message: 'does not name a site of this organization (got null)' },
        { path: '/assetId', message: `does not name an asset of this organization (got ${w.foreign.asset})` },
        { path: '/runId', message: 'does not name a run of this organization (got run_x)' },
      ],
    }));
    expect(res.body.error).toBe('/siteId does not name a site of this organization (got null) (and 2 more)');
  });

  it('answers 404, not 400, when the addressed resource is missing', async () => {
    for (const path of ['/v1/issues/iss_000000000000000000000000', '/v1/assets/ast_000000000000000000000000', '/v1/schedules/sch_000000000000000000000000']) {
      expect((await send('patch', path, { siteId: 'null' })).body).toEqual(anError('NOT_FOUND'));
    }
  });

  it('a JSON null still clears a nullable reference', async () => {
    const issue = (await send('post', '/v1/issues', issueBody(w)).expect(201)).body;
    const cleared = (await send('patch', `/v1/issues/${issue.id}`, { siteId: null, assetId: null, runId: null }).expect(200)).body;
    expect(cleared).toMatchObject({ siteId: null, assetId: null, runId: null });
    const asset = (await send('post', '/v1/assets', { name: 'Valve', siteId: w.mine.site }).expect(201)).body;
    expect((await send('patch', `/v1/assets/${asset.id}`, { siteId: null }).expect(200)).body.siteId).toBeNull();
  });

  it('a resource outlives what it names: deleting a site or asset leaves its issues, and re-sending the stored value is no change', async () => {
    const site = (await newSite(t)).id;
    const asset = (await newAsset(t, t.auth, { name: 'Old pump', siteId: site })).id;
    const issue = (await send('post', '/v1/issues', { title: 'Pump leaks', siteId: site, assetId: asset }).expect(201)).body;
    const schedule = (await send('post', '/v1/schedules', { ...scheduleBody(w), siteId: site }).expect(201)).body;
    await t.http.delete(`/v1/assets/${asset}`).set('Authorization', t.auth).expect(204);
    await t.http.delete(`/v1/sites/${site}`).set('Authorization', t.auth).expect(204);

    expect((await t.http.get(`/v1/issues/${issue.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(issue);
    // a client sending the whole resource back is not refused for references it did not change
    const edited = (await send('patch', `/v1/issues/${issue.id}`, { title: 'Pump leaks (replaced)', siteId: site, assetId: asset }).expect(200)).body;
    expect(edited).toMatchObject({ title: 'Pump leaks (replaced)', siteId: site, assetId: asset });
    expect((await send('patch', `/v1/schedules/${schedule.id}`, { siteId: site, durationMinutes: 30 }).expect(200)).body).toMatchObject({ siteId: site, durationMinutes: 30 });
    // but a new value must name a live one, and a run cannot be started there any more
    const moved = await send('patch', `/v1/issues/${issue.id}`, { siteId: w.deleted.site! }).expect(400);
    expect(moved.body.details).toEqual([{ path: '/siteId', message: `does not name a site of this organization (got ${w.deleted.site})` }]);
    const run = await send('post', '/v1/runs', { templateId: w.mine.template, siteId: site, userId: 'user-42' }).expect(400);
    expect(run.body.details).toEqual([{ path: '/siteId', message: `does not name a site of this organization (got ${site})` }]);
  });

  it('leaves external identities, check-in sites, sensor sites and log entities free', async () => {
    const issue = await send('post', '/v1/issues', { title: 'Assigned elsewhere', assigneeUserId: 'idp|nobody-we-know' }).expect(201);
    expect(issue.body.assigneeUserId).toBe('idp|nobody-we-know');
    const run = await send('post', '/v1/runs', { templateId: w.mine.template, siteId: w.mine.site, userId: 'idp|stranger' }).expect(201);
    expect(run.body.userId).toBe('idp|stranger');
    const checkin = await send('post', '/v1/checkins', { userId: 'idp|stranger', siteId: 'site_known_only_to_the_field_app' }).expect(201);
    expect(checkin.body.siteId).toBe('site_known_only_to_the_field_app');
    const readings = await send('post', '/v1/sensor-readings', {
      readings: [{ provider: 'acme', sensorExternalId: 'th-9', siteId: 'site_not_registered_yet', metric: 'temperature_c', value: 20, unit: 'C', occurredAt: '2026-11-22T09:00:00Z' }],
    }).expect(201);
    expect(readings.body).toMatchObject({ ingested: 1, data: [{ siteId: 'site_not_registered_yet' }] });
    await send('post', '/v1/logs', { entityType: 'ticket', entityId: 'JIRA-1234', message: 'Raised upstream' }).expect(201);
    const user = await send('post', '/v1/users', { userId: 'idp|stranger', lastLocationSiteId: 'site_known_only_to_the_field_app' }).expect(201);
    expect(user.body.lastLocationSiteId).toBe('site_known_only_to_the_field_app');
  });
});
