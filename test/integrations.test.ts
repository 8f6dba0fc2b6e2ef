import { describeEachDatabase, anError, aTimestamp } from './support/testApp';
import { operations } from '../generated/operations';
import { bindCursor } from '../runtime/http/cursorBinding';
import { EVENT_TYPES } from '../runtime/domain/eventTypes';

const ALL_ACTION_KEYS = [
  'complete_run', 'create_asset', 'create_checkin', 'create_issue', 'create_log', 'ingest_sensor_readings', 'start_run', 'update_checkin', 'update_issue',
];

describeEachDatabase('integrations', (t) => {
  describe('listIntegrationActions', () => {
    it("lists the workflow-automation partner's actions by key, each mapped to its operation from the contract", async () => {
      const res = await t.http.get('/v1/integrations/workflow-automation/actions').set('Authorization', t.auth).expect(200);
      expect(res.body.nextCursor).toBeNull();
      expect(res.body.data.map((a: { key: string }) => a.key)).toEqual(ALL_ACTION_KEYS);
      expect(res.body.data).toContainEqual({
        key: 'create_issue',
        name: 'Raise an issue',
        description: expect.any(String),
        operationId: 'createIssue',
        method: 'POST',
        path: '/v1/issues',
        scopes: ['issues:write'],
      });
      expect(res.body.data).toContainEqual(expect.objectContaining({ key: 'update_issue', method: 'PATCH', path: '/v1/issues/{id}', scopes: ['issues:write'] }));
      expect(res.body.data).toContainEqual(expect.objectContaining({ key: 'complete_run', method: 'POST', path: '/v1/runs/{id}/complete', scopes: ['runs:write'] }));
      expect(res.body.data).toContainEqual(expect.objectContaining({ key: 'ingest_sensor_readings', operationId: 'ingestSensorReadings', path: '/v1/sensor-readings', scopes: ['sensors:write'] }));
      for (const action of res.body.data) {
        const op = operations[action.operationId as keyof typeof operations];
        expect({ method: action.method, path: action.path, scopes: action.scopes }).toEqual({ method: op.method.toUpperCase(), path: op.path, scopes: op.scopes });
      }
    });

    it('has no actions for the webhooks partner, which only receives events', async () => {
      const res = await t.http.get('/v1/integrations/webhooks/actions').set('Authorization', t.auth).expect(200);
      expect(res.body).toEqual({ data: [], nextCursor: null });
    });

    it('pages the catalogue with cursors like every list', async () => {
      const keys: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const url: string = `/v1/integrations/workflow-automation/actions?limit=2${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await t.http.get(url).set('Authorization', t.auth).expect(200);
        expect(res.body.data.length).toBeLessThanOrEqual(2);
        keys.push(...res.body.data.map((a: { key: string }) => a.key));
        cursor = res.body.nextCursor;
        pages++;
      } while (cursor);
      expect(keys).toEqual(ALL_ACTION_KEYS);
      expect(pages).toBe(5);
      const bad = await t.http.get('/v1/integrations/workflow-automation/actions?cursor=garbage').set('Authorization', t.auth).expect(400);
      expect(bad.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }] }));
    });
  });

  describe('listIntegrationTriggers', () => {
    it('lists one trigger per event type the API records, each with a sample in the delivered shape', async () => {
      for (const partner of ['workflow-automation', 'webhooks']) {
        const res = await t.http.get(`/v1/integrations/${partner}/triggers?limit=100`).set('Authorization', t.auth).expect(200);
        expect(res.body.nextCursor).toBeNull();
        expect(res.body.data.map((tr: { key: string }) => tr.key)).toEqual([...EVENT_TYPES]);
        for (const trigger of res.body.data) {
          expect(trigger).toEqual({
            key: trigger.key, name: expect.any(String), description: expect.any(String), resource: trigger.key.split('.')[0],
            samplePayload: {
              id: expect.stringMatching(/^evt_/), type: trigger.key, timestamp: aTimestamp(), sequence: expect.any(Number),
              data: expect.any(Object),
              // an update's sample names what changed and what it was before, field for field
              ...(trigger.samplePayload.changedFields ? { changedFields: expect.any(Array), previousValues: expect.any(Object) } : {}),
            },
          });
          if (trigger.samplePayload.changedFields) expect(Object.keys(trigger.samplePayload.previousValues)).toEqual(trigger.samplePayload.changedFields);
        }
      }
    });

    it('shows an issue.created sample shaped like an Issue', async () => {
      const res = await t.http.get('/v1/integrations/webhooks/triggers?limit=1&cursor=' + bindCursor('listIntegrationTriggers', { partner: 'webhooks' }, {}, Buffer.from(JSON.stringify(['checkin.updated'])).toString('base64url')))
        .set('Authorization', t.auth).expect(200);
      expect(res.body.data).toHaveLength(1);
      expect(res.body.data[0].key).toBe('issue.closed');
      const sample = res.body.data[0].samplePayload.data;
      const real = (await t.http.post('/v1/issues').set('Authorization', t.auth).send({ title: 'Compare' }).expect(201)).body;
      expect(Object.keys(sample).sort()).toEqual(Object.keys(real).sort());
      expect(res.body.nextCursor).toEqual(expect.any(String));
    });
  });

  describe('listIntegrationSubscriptions', () => {
    async function subscribe(auth: string, partner: string, triggerKey: string, status = 'active') {
      const created = await t.http.post(`/v1/integrations/${partner}/subscriptions`).set('Authorization', auth)
        .send({ targetUrl: `https://93.184.215.14/hooks/${triggerKey}`, triggerKey }).expect(201);
      const { secret: _secret, ...subscription } = created.body;
      if (status === 'active') return subscription;
      return (await t.http.patch(`/v1/integrations/${partner}/subscriptions/${subscription.id}`).set('Authorization', auth).send({ status }).expect(200)).body;
    }

    it('is an empty list when the organization has no subscription', async () => {
      const res = await t.http.get('/v1/integrations/webhooks/subscriptions').set('Authorization', t.auth).expect(200);
      expect(res.body).toEqual({ data: [], nextCursor: null });
    });

    it("lists the organization's subscriptions with that partner, filtered, oldest first, paged", async () => {
      const auth = await t.newKey({ organization: 'subs-org' });
      const created = await subscribe(auth, 'workflow-automation', 'issue.created');
      const resolved = await subscribe(auth, 'workflow-automation', 'issue.resolved', 'paused');
      const run = await subscribe(auth, 'workflow-automation', 'run.completed');
      const elsewhere = await subscribe(auth, 'webhooks', 'issue.created');

      const all = await t.http.get('/v1/integrations/workflow-automation/subscriptions').set('Authorization', auth).expect(200);
      expect(all.body).toEqual({ data: [created, resolved, run], nextCursor: null });
      const hooks = await t.http.get('/v1/integrations/webhooks/subscriptions').set('Authorization', auth).expect(200);
      expect(hooks.body).toEqual({ data: [elsewhere], nextCursor: null });

      const byTrigger = await t.http.get('/v1/integrations/workflow-automation/subscriptions?triggerKey=run.completed').set('Authorization', auth).expect(200);
      expect(byTrigger.body).toEqual({ data: [run], nextCursor: null });
      // a misspelt type is refused, naming the types, rather than answered with an empty list
      const misspelt = await t.http.get('/v1/integrations/workflow-automation/subscriptions?triggerKey=run.complete').set('Authorization', auth).expect(400);
      expect(misspelt.body).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: '/query/triggerKey', message: expect.stringContaining('"run.completed"') }] });
      const byStatus = await t.http.get('/v1/integrations/workflow-automation/subscriptions?status=paused').set('Authorization', auth).expect(200);
      expect(byStatus.body).toEqual({ data: [resolved], nextCursor: null });

      const first = await t.http.get('/v1/integrations/workflow-automation/subscriptions?limit=2').set('Authorization', auth).expect(200);
      expect(first.body).toEqual({ data: [created, resolved], nextCursor: expect.any(String) });
      const second = await t.http.get(`/v1/integrations/workflow-automation/subscriptions?limit=2&cursor=${first.body.nextCursor}`).set('Authorization', auth).expect(200);
      expect(second.body).toEqual({ data: [run], nextCursor: null });

      const badStatus = await t.http.get('/v1/integrations/workflow-automation/subscriptions?status=on').set('Authorization', auth).expect(400);
      expect(badStatus.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/status', message: 'must be one of "active", "paused", "disabled"' }] }));
    });

    it("never shows another organization's subscriptions", async () => {
      await subscribe(await t.newKey({ organization: 'subs-owner' }), 'webhooks', 'checkin.activated');
      const other = await t.newKey({ organization: 'subs-other' });
      const res = await t.http.get('/v1/integrations/webhooks/subscriptions').set('Authorization', other).expect(200);
      expect(res.body).toEqual({ data: [], nextCursor: null });
    });
  });

  describe('partners, scopes', () => {
    it('answers 404 for an unknown partner and 400 for a malformed partner word', async () => {
      for (const what of ['actions', 'triggers', 'subscriptions']) {
        const unknown = await t.http.get(`/v1/integrations/zapier-clone/${what}`).set('Authorization', t.auth).expect(404);
        expect(unknown.body).toEqual(anError('NOT_FOUND'));
        const malformed = await t.http.get(`/v1/integrations/Web_Hooks/${what}`).set('Authorization', t.auth).expect(400);
        expect(malformed.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/path/partner', message: expect.stringContaining('pattern') }] }));
      }
    });

    it('needs the integrations:read scope', async () => {
      const noScope = await t.newKey({ scopes: ['issues:read'] });
      const res = await t.http.get('/v1/integrations/webhooks/triggers').set('Authorization', noScope).expect(403);
      expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
      expect(res.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="integrations:read"');
      const scoped = await t.newKey({ scopes: ['integrations:read'] });
      await t.http.get('/v1/integrations/webhooks/subscriptions').set('Authorization', scoped).expect(200);
      await t.http.get('/v1/integrations/webhooks/triggers').expect(401);
    });
  });
});
