import { describeEachDatabase, anId, aTimestamp, anError, TestContext } from './support/testApp';
import { newAsset, newSite } from './support/resources';

const checklist = {
  name: 'Substation monthly check',
  items: [
    { id: 'fence-intact', label: 'Perimeter fence intact', type: 'yes_no', required: true },
    { id: 'doors-locked', label: 'Doors locked', type: 'yes_no', required: true },
    { id: 'oil-level', label: 'Transformer oil level', type: 'choice', required: true, options: ['low', 'ok', 'high'] },
    { id: 'temperature', label: 'Temperature (°C)', type: 'number' },
    { id: 'notes', label: 'Notes', type: 'text' },
    { id: 'gauge-photo', label: 'Photo of the gauge', type: 'photo_url' },
    { id: 'spare-yes-no', label: 'Spare parts on site', type: 'yes_no' },
  ],
};

const withDefaults = (items: Record<string, unknown>[]) => items.map((i) => ({ required: false, options: null, ...i }));

async function newTemplate(t: TestContext, auth = t.auth, body: object = checklist) {
  return (await t.http.post('/v1/templates').set('Authorization', auth).send(body).expect(201)).body;
}

async function newRun(t: TestContext, templateId: string, auth = t.auth, extra: { siteId?: string; userId?: string } = {}) {
  const siteId = extra.siteId ?? (await newSite(t, auth)).id;
  return (await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId, userId: 'user-42', ...extra, siteId }).expect(201)).body;
}

describeEachDatabase('runs', (t) => {
  describe('createRun', () => {
    it('starts an in-progress run of the current template version', async () => {
      const template = await newTemplate(t);
      const site = await newSite(t);
      const asset = await newAsset(t, t.auth, { name: 'Transformer T1', siteId: site.id });
      const res = await t.http.post('/v1/runs').set('Authorization', t.auth)
        .send({ templateId: template.id, siteId: site.id, userId: 'user-42', assetId: asset.id }).expect(201);
      expect(res.body).toEqual({
        id: anId('run'), templateId: template.id, templateVersion: 1, items: withDefaults(checklist.items),
        siteId: site.id, userId: 'user-42', assetId: asset.id, occurrenceId: null,
        status: 'in_progress', answers: {}, score: null, failedItemIds: null,
        startedAt: aTimestamp(), completedAt: null, createdAt: res.body.startedAt, updatedAt: res.body.startedAt,
      });
      expect(res.headers.location).toBe(`/v1/runs/${res.body.id}`);
      expect(await t.db.knex('runs').where({ id: res.body.id }).first()).toMatchObject({ template_id: template.id, template_version: 1, status: 'in_progress', answers: '{}' });
    });

    it('answers 400 naming /templateId for an unknown, deleted or foreign template', async () => {
      const { id: s } = await newSite(t);
      const unknown = await t.http.post('/v1/runs').set('Authorization', t.auth).send({ templateId: 'tpl_nope', siteId: s, userId: 'u' }).expect(400);
      expect(unknown.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/templateId', message: expect.stringContaining('does not name a template') }] }));

      const deleted = await newTemplate(t);
      await t.http.delete(`/v1/templates/${deleted.id}`).set('Authorization', t.auth).expect(204);
      await t.http.post('/v1/runs').set('Authorization', t.auth).send({ templateId: deleted.id, siteId: s, userId: 'u' }).expect(400);

      const foreign = await newTemplate(t, await t.newKey({ organization: 'runs-foreign-template' }));
      await t.http.post('/v1/runs').set('Authorization', t.auth).send({ templateId: foreign.id, siteId: s, userId: 'u' }).expect(400);
    });

    it('refuses a missing field and an occurrenceId that is no occurrence id', async () => {
      const template = await newTemplate(t);
      const { id: s } = await newSite(t);
      const missing = await t.http.post('/v1/runs').set('Authorization', t.auth).send({ templateId: template.id, siteId: s }).expect(400);
      expect(missing.body.details).toEqual([{ path: '/userId', message: 'is required' }]);
      const badOcc = await t.http.post('/v1/runs').set('Authorization', t.auth).send({ templateId: template.id, siteId: s, userId: 'u', occurrenceId: 'tomorrow' }).expect(400);
      expect(badOcc.body.details).toEqual([{ path: '/occurrenceId', message: expect.stringContaining('must match pattern') }]);
      const noSuch = await t.http.post('/v1/runs').set('Authorization', t.auth)
        .send({ templateId: template.id, siteId: s, userId: 'u', occurrenceId: `occ_${'0'.repeat(24)}_20260330T080000Z` }).expect(400);
      expect(noSuch.body.details).toEqual([{ path: '/occurrenceId', message: 'does not name an occurrence of any schedule of this organization' }]);
    });
  });

  describe('template versioning', () => {
    it('a run keeps the items of the version it was started with after the template changes', async () => {
      const template = await newTemplate(t);
      const run = await newRun(t, template.id);
      await t.http.patch(`/v1/templates/${template.id}`).set('Authorization', t.auth)
        .send({ items: [{ id: 'only-item', label: 'The only item', type: 'yes_no', required: true }] }).expect(200);

      const again = (await t.http.get(`/v1/runs/${run.id}`).set('Authorization', t.auth).expect(200)).body;
      expect(again).toEqual(run);
      // answers are checked against version 1: its items are accepted, version 2's are not
      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { 'oil-level': 'ok' } }).expect(200);
      const wrongVersion = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { 'only-item': true } }).expect(400);
      expect(wrongVersion.body.details).toEqual([{ path: '/answers/only-item', message: "is not an item of this run's template (version 1)" }]);

      const newer = await newRun(t, template.id);
      expect(newer).toMatchObject({ templateVersion: 2, items: [{ id: 'only-item', label: 'The only item', type: 'yes_no', required: true, options: null }] });

      // the template's deletion does not take the run's items with it
      await t.http.delete(`/v1/templates/${template.id}`).set('Authorization', t.auth).expect(204);
      expect((await t.http.get(`/v1/runs/${run.id}`).set('Authorization', t.auth).expect(200)).body.items).toEqual(run.items);
    });
  });

  describe('updateRun (answers)', () => {
    it('accepts one valid answer of each type and merges answers, in template order', async () => {
      const run = await newRun(t, (await newTemplate(t)).id);
      const first = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth)
        .send({ answers: { notes: 'Gate hinge rusty', 'fence-intact': false } }).expect(200);
      expect(first.body).toEqual({ ...run, answers: { 'fence-intact': false, notes: 'Gate hinge rusty' }, updatedAt: aTimestamp() });

      const second = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth)
        .send({ answers: { 'oil-level': 'high', temperature: -3.5, 'gauge-photo': 'https://photos.example.com/g/1.jpg', 'fence-intact': true } }).expect(200);
      expect(second.body.answers).toEqual({ 'fence-intact': true, 'oil-level': 'high', temperature: -3.5, notes: 'Gate hinge rusty', 'gauge-photo': 'https://photos.example.com/g/1.jpg' });

      const cleared = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { notes: null } }).expect(200);
      expect(cleared.body.answers).toEqual({ 'fence-intact': true, 'oil-level': 'high', temperature: -3.5, 'gauge-photo': 'https://photos.example.com/g/1.jpg' });
      expect(JSON.parse((await t.db.knex('runs').where({ id: run.id }).first()).answers)).toEqual(cleared.body.answers);
    });

    it('names every unknown item and every value of the wrong type, and stores nothing', async () => {
      const run = await newRun(t, (await newTemplate(t)).id);
      const res = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({
        answers: {
          'fence-intact': 'yes',
          'oil-level': 'medium',
          temperature: '21',
          notes: '',
          'gauge-photo': 'ftp://photos.example.com/1.jpg',
          'no-such-item': true,
          'doors-locked': true,
        },
      }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', {
        details: [
          { path: '/answers/fence-intact', message: 'must be true or false (yes_no item)' },
          { path: '/answers/oil-level', message: 'must be one of "low", "ok", "high" (choice item)' },
          { path: '/answers/temperature', message: 'must be a number (number item)' },
          { path: '/answers/notes', message: 'must be a non-empty string of at most 10000 characters (text item)' },
          { path: '/answers/gauge-photo', message: 'must be an http or https URL of at most 2048 characters (photo_url item)' },
          { path: '/answers/no-such-item', message: "is not an item of this run's template (version 1)" },
        ],
      }));
      expect(await t.db.knex('runs').where({ id: run.id }).first()).toMatchObject({ answers: '{}' });
    });

    it('refuses values that are no answer at all, and an empty answers object', async () => {
      const run = await newRun(t, (await newTemplate(t)).id);
      const obj = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { notes: { text: 'x' } } }).expect(400);
      expect(obj.body.details).toEqual([{ path: '/answers/notes', message: 'must be boolean,string,number,null' }]);
      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: {} }).expect(400);
      const photo = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { 'gauge-photo': 'not a url' } }).expect(400);
      expect(photo.body.details).toEqual([{ path: '/answers/gauge-photo', message: expect.stringContaining('http or https URL') }]);
    });
  });

  describe('completeRun', () => {
    it('answers 409 RUN_INCOMPLETE listing every unanswered required item', async () => {
      const run = await newRun(t, (await newTemplate(t)).id);
      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { 'doors-locked': true } }).expect(200);
      const res = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', t.auth).expect(409);
      expect(res.body).toEqual(anError('RUN_INCOMPLETE', {
        error: 'The run has 2 unanswered required items: fence-intact, oil-level',
        details: [
          { path: '/answers/fence-intact', message: 'is required (Perimeter fence intact)' },
          { path: '/answers/oil-level', message: 'is required (Transformer oil level)' },
        ],
      }));
      expect(await t.db.knex('runs').where({ id: run.id }).first()).toMatchObject({ status: 'in_progress', completed_at: null });
    });

    it('records completedAt, the score over answered yes_no items and the failed items; then the run is read-only', async () => {
      const run = await newRun(t, (await newTemplate(t)).id);
      const answers = { 'fence-intact': false, 'doors-locked': true, 'oil-level': 'ok', 'spare-yes-no': true };
      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers }).expect(200);
      const done = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', t.auth).expect(200);
      expect(done.body).toEqual({
        ...run, answers, status: 'completed', score: 2 / 3, failedItemIds: ['fence-intact'], completedAt: aTimestamp(), updatedAt: done.body.completedAt,
      });
      expect(await t.db.knex('runs').where({ id: run.id }).first()).toMatchObject({ status: 'completed', failed_item_ids: '["fence-intact"]' });

      const again = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', t.auth).expect(409);
      expect(again.body).toEqual(anError('INVALID_TRANSITION'));
      const edit = await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { 'fence-intact': true } }).expect(409);
      expect(edit.body).toEqual(anError('INVALID_TRANSITION'));
      expect((await t.http.get(`/v1/runs/${run.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(done.body);
    });

    it('scores null when no yes_no item is answered', async () => {
      const template = await newTemplate(t, t.auth, { name: 'Readings', items: [{ id: 'temp', label: 'Temperature', type: 'number', required: true }] });
      const run = await newRun(t, template.id);
      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', t.auth).send({ answers: { temp: 21 } }).expect(200);
      const done = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', t.auth).expect(200);
      expect(done.body).toMatchObject({ status: 'completed', score: null, failedItemIds: [] });
    });

    it('replays a completion sent again with the same Idempotency-Key', async () => {
      const template = await newTemplate(t, t.auth, { name: 'One', items: [{ id: 'ok', label: 'OK?', type: 'yes_no' }] });
      const run = await newRun(t, template.id);
      const first = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', t.auth).set('Idempotency-Key', `complete-${run.id}`).expect(200);
      const replay = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', t.auth).set('Idempotency-Key', `complete-${run.id}`).expect(200);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(first.body);
    });
  });

  describe('listRuns', () => {
    it('filters by status, siteId, templateId and userId, and pages', async () => {
      const auth = await t.newKey({ organization: 'paging-runs' });
      const a = await newTemplate(t, auth, { name: 'A', items: [{ id: 'x', label: 'X', type: 'yes_no' }] });
      const b = await newTemplate(t, auth, { name: 'B', items: [{ id: 'x', label: 'X', type: 'yes_no' }] });
      const site1 = await newSite(t, auth);
      const site2 = await newSite(t, auth);
      const r1 = await newRun(t, a.id, auth, { siteId: site1.id, userId: 'ann' });
      const r2 = await newRun(t, a.id, auth, { siteId: site2.id, userId: 'bob' });
      const r3 = await newRun(t, b.id, auth, { siteId: site1.id, userId: 'bob' });
      await t.http.post(`/v1/runs/${r2.id}/complete`).set('Authorization', auth).expect(200);

      const ids = async (q: string) => (await t.http.get(`/v1/runs${q}`).set('Authorization', auth).expect(200)).body.data.map((r: { id: string }) => r.id);
      expect(await ids('')).toEqual([r1.id, r2.id, r3.id]);
      expect(await ids('?status=completed')).toEqual([r2.id]);
      expect(await ids(`?status=in_progress&siteId=${site1.id}`)).toEqual([r1.id, r3.id]);
      expect(await ids(`?templateId=${b.id}`)).toEqual([r3.id]);
      expect(await ids('?userId=bob')).toEqual([r2.id, r3.id]);

      const page1 = await t.http.get('/v1/runs?limit=2').set('Authorization', auth).expect(200);
      expect(page1.body.data.map((r: { id: string }) => r.id)).toEqual([r1.id, r2.id]);
      const page2 = await t.http.get(`/v1/runs?limit=2&cursor=${page1.body.nextCursor}`).set('Authorization', auth).expect(200);
      expect(page2.body).toEqual({ data: [expect.objectContaining({ id: r3.id })], nextCursor: null });

      const bad = await t.http.get('/v1/runs?status=done').set('Authorization', auth).expect(400);
      expect(bad.body.details).toEqual([{ path: '/query/status', message: 'must be one of "in_progress", "completed"' }]);
    });
  });

  describe('tenancy', () => {
    it("never shows or changes another organization's run", async () => {
      const other = await t.newKey({ organization: 'other-org-runs' });
      const run = await newRun(t, (await newTemplate(t)).id);
      await t.http.get(`/v1/runs/${run.id}`).set('Authorization', other).expect(404);
      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', other).send({ answers: { notes: 'x' } }).expect(404);
      const complete = await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', other).expect(404);
      expect(complete.body).toEqual(anError('NOT_FOUND'));
      expect((await t.http.get('/v1/runs').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get(`/v1/runs/${run.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(run);
    });
  });
});
