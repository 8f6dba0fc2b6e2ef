import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';

const monthly = {
  name: 'Substation monthly check',
  items: [
    { id: 'fence-intact', label: 'Perimeter fence intact', type: 'yes_no', required: true },
    { id: 'oil-level', label: 'Transformer oil level', type: 'choice', required: true, options: ['low', 'ok', 'high'] },
    { id: 'notes', label: 'Notes', type: 'text' },
  ],
};

const storedItems = [
  { id: 'fence-intact', label: 'Perimeter fence intact', type: 'yes_no', required: true, options: null },
  { id: 'oil-level', label: 'Transformer oil level', type: 'choice', required: true, options: ['low', 'ok', 'high'] },
  { id: 'notes', label: 'Notes', type: 'text', required: false, options: null },
];

describeEachDatabase('templates', (t) => {
  describe('createTemplate', () => {
    it('creates version 1 with defaults filled in, and keeps a snapshot of its items', async () => {
      const res = await t.http.post('/v1/templates').set('Authorization', t.auth).send(monthly).expect(201);
      expect(res.body).toEqual({
        id: anId('tpl'), name: monthly.name, description: null, version: 1, items: storedItems, createdAt: aTimestamp(), updatedAt: res.body.createdAt,
      });
      expect(res.headers.location).toBe(`/v1/templates/${res.body.id}`);
      const versions = await t.db.knex('template_versions').where({ template_id: res.body.id });
      expect(versions.map((v) => ({ version: v.version, items: JSON.parse(v.items) }))).toEqual([{ version: 1, items: storedItems }]);
    });

    it('names a duplicated item id, and options on the wrong item types', async () => {
      const res = await t.http.post('/v1/templates').set('Authorization', t.auth).send({
        name: 'Bad',
        items: [
          { id: 'a', label: 'A', type: 'yes_no' },
          { id: 'a', label: 'A again', type: 'text', options: ['x'] },
          { id: 'c', label: 'C', type: 'choice' },
        ],
      }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', {
        details: [
          { path: '/items/1/id', message: 'duplicates the id "a" of /items/0; item ids are unique within a template' },
          { path: '/items/1/options', message: 'is only allowed for choice items (item "a" is text)' },
          { path: '/items/2/options', message: 'is required for a choice item' },
        ],
      }));
      expect(await t.db.knex('templates').where({ name: 'Bad' })).toHaveLength(0);
    });

    it('refuses item ids outside the pattern, unknown types, unknown fields and an empty list', async () => {
      const badId = await t.http.post('/v1/templates').set('Authorization', t.auth).send({ name: 'X', items: [{ id: 'Has Space', label: 'L', type: 'text' }] }).expect(400);
      expect(badId.body.details).toEqual([{ path: '/items/0/id', message: 'must match pattern "^[a-z0-9_-]{1,40}$"' }]);
      const badType = await t.http.post('/v1/templates').set('Authorization', t.auth).send({ name: 'X', items: [{ id: 'a', label: 'L', type: 'signature' }] }).expect(400);
      expect(badType.body.details).toEqual([{ path: '/items/0/type', message: 'must be one of "yes_no", "text", "number", "choice", "photo_url"' }]);
      const unknown = await t.http.post('/v1/templates').set('Authorization', t.auth).send({ name: 'X', items: [{ id: 'a', label: 'L', type: 'text', weight: 2 }] }).expect(400);
      expect(unknown.body.details).toEqual([{ path: '/items/0/weight', message: 'is not a known field' }]);
      const empty = await t.http.post('/v1/templates').set('Authorization', t.auth).send({ name: 'X', items: [] }).expect(400);
      expect(empty.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/items', message: 'must NOT have fewer than 1 items' }] }));
    });
  });

  describe('updateTemplate', () => {
    it('increments the version on every update and snapshots each version', async () => {
      const created = (await t.http.post('/v1/templates').set('Authorization', t.auth).send(monthly).expect(201)).body;
      const renamed = await t.http.patch(`/v1/templates/${created.id}`).set('Authorization', t.auth).send({ name: 'Renamed', description: 'Walk the perimeter first.' }).expect(200);
      expect(renamed.body).toEqual({ ...created, name: 'Renamed', description: 'Walk the perimeter first.', version: 2, updatedAt: aTimestamp() });

      const newItems = [{ id: 'gauge-photo', label: 'Photo of the gauge', type: 'photo_url', required: true }];
      const reitemed = await t.http.patch(`/v1/templates/${created.id}`).set('Authorization', t.auth).send({ items: newItems, description: null }).expect(200);
      expect(reitemed.body).toEqual({
        ...created, name: 'Renamed', description: null, version: 3, updatedAt: aTimestamp(),
        items: [{ id: 'gauge-photo', label: 'Photo of the gauge', type: 'photo_url', required: true, options: null }],
      });
      expect((await t.http.get(`/v1/templates/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(reitemed.body);

      const versions = await t.db.knex('template_versions').where({ template_id: created.id }).orderBy('version');
      expect(versions.map((v) => [v.version, JSON.parse(v.items).map((i: { id: string }) => i.id)])).toEqual([
        [1, ['fence-intact', 'oil-level', 'notes']],
        [2, ['fence-intact', 'oil-level', 'notes']],
        [3, ['gauge-photo']],
      ]);
    });

    it('validates items like create, and refuses an empty update', async () => {
      const created = (await t.http.post('/v1/templates').set('Authorization', t.auth).send(monthly).expect(201)).body;
      const dup = await t.http.patch(`/v1/templates/${created.id}`).set('Authorization', t.auth)
        .send({ items: [{ id: 'x', label: 'X', type: 'number' }, { id: 'x', label: 'X', type: 'number' }] }).expect(400);
      expect(dup.body.details).toEqual([{ path: '/items/1/id', message: 'duplicates the id "x" of /items/0; item ids are unique within a template' }]);
      await t.http.patch(`/v1/templates/${created.id}`).set('Authorization', t.auth).send({}).expect(400);
      expect((await t.http.get(`/v1/templates/${created.id}`).set('Authorization', t.auth).expect(200)).body.version).toBe(1);
    });
  });

  describe('deleteTemplate', () => {
    it('hides the template but keeps its version snapshots', async () => {
      const created = (await t.http.post('/v1/templates').set('Authorization', t.auth).send(monthly).expect(201)).body;
      await t.http.delete(`/v1/templates/${created.id}`).set('Authorization', t.auth).expect(204);
      expect((await t.http.get(`/v1/templates/${created.id}`).set('Authorization', t.auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
      await t.http.patch(`/v1/templates/${created.id}`).set('Authorization', t.auth).send({ name: 'Z' }).expect(404);
      await t.http.delete(`/v1/templates/${created.id}`).set('Authorization', t.auth).expect(404);
      expect(await t.db.knex('template_versions').where({ template_id: created.id })).toHaveLength(1);
      const list = await t.http.get('/v1/templates?limit=500').set('Authorization', t.auth).expect(200);
      expect(list.body.data.map((x: { id: string }) => x.id)).not.toContain(created.id);
    });
  });

  describe('listTemplates', () => {
    it('pages through every template exactly once, oldest first', async () => {
      const auth = await t.newKey({ organization: 'paging-templates' });
      for (let i = 0; i < 5; i++) await t.http.post('/v1/templates').set('Authorization', auth).send({ ...monthly, name: `t${i}` }).expect(201);
      const first = await t.http.get('/v1/templates?limit=2').set('Authorization', auth).expect(200);
      expect(first.body.data.map((x: { name: string }) => x.name)).toEqual(['t0', 't1']);
      const seen = [...first.body.data];
      let cursor = first.body.nextCursor;
      while (cursor) {
        const res = await t.http.get(`/v1/templates?limit=2&cursor=${cursor}`).set('Authorization', auth).expect(200);
        seen.push(...res.body.data);
        cursor = res.body.nextCursor;
      }
      expect(seen.map((x) => x.name)).toEqual(['t0', 't1', 't2', 't3', 't4']);
    });
  });

  describe('scopes and tenancy', () => {
    it('needs templates:write to create and templates:read to read', async () => {
      const reader = await t.newKey({ scopes: ['templates:read'] });
      const res = await t.http.post('/v1/templates').set('Authorization', reader).send(monthly).expect(403);
      expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
      await t.http.get('/v1/templates').set('Authorization', reader).expect(200);
      const runsOnly = await t.newKey({ scopes: ['runs:read'] });
      await t.http.get('/v1/templates').set('Authorization', runsOnly).expect(403);
    });

    it("never shows another organization's template", async () => {
      const other = await t.newKey({ organization: 'other-org-templates' });
      const mine = (await t.http.post('/v1/templates').set('Authorization', t.auth).send(monthly).expect(201)).body;
      await t.http.get(`/v1/templates/${mine.id}`).set('Authorization', other).expect(404);
      await t.http.patch(`/v1/templates/${mine.id}`).set('Authorization', other).send({ name: 'Stolen' }).expect(404);
      await t.http.delete(`/v1/templates/${mine.id}`).set('Authorization', other).expect(404);
      expect((await t.http.get('/v1/templates').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get(`/v1/templates/${mine.id}`).set('Authorization', t.auth).expect(200)).body.name).toBe(monthly.name);
    });
  });
});
