import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';

const checkinId = 'chk_8f3k2m9q4t7w1x5z6c0v2b8n';
const comment = { entityType: 'checkin', entityId: checkinId, message: 'Gate code changed, asked the site manager for the new one.' };

describeEachDatabase('logs', (t) => {
  describe('createLog', () => {
    it('appends an entry with the defaults and answers 201 with Location', async () => {
      const res = await t.http.post('/v1/logs').set('Authorization', t.auth).send(comment).expect(201);
      expect(res.body).toEqual({ id: anId('log'), ...comment, entryType: 'comment', source: 'api', createdAt: aTimestamp() });
      expect(res.headers.location).toBe(`/v1/logs/${res.body.id}`);
      const stored = await t.db.knex('logs').where({ id: res.body.id }).first();
      expect(stored).toMatchObject({ entity_type: 'checkin', entity_id: checkinId, entry_type: 'comment', source: 'api', message: comment.message, created_at: res.body.createdAt });
    });

    it('keeps the entryType and source sent', async () => {
      const body = { ...comment, entryType: 'status', source: 'mobile_app', message: 'On site.' };
      const res = await t.http.post('/v1/logs').set('Authorization', t.auth).send(body).expect(201);
      expect(res.body).toEqual({ id: anId('log'), ...body, createdAt: aTimestamp() });
    });

    it('stores a 10,000-character message and rejects 10,001 characters, an empty message and white space only', async () => {
      const longest = 'x'.repeat(10_000);
      const ok = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, message: longest }).expect(201);
      expect((await t.db.knex('logs').where({ id: ok.body.id }).first()).message).toBe(longest);

      const tooLong = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, message: longest + 'x' }).expect(400);
      expect(tooLong.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/message', message: 'must NOT have more than 10000 characters' }] }));
      const empty = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, message: '' }).expect(400);
      expect(empty.body.details).toContainEqual({ path: '/message', message: 'must NOT have fewer than 1 characters' });
      const blank = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, message: ' \n\t ' }).expect(400);
      expect(blank.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/message', message: 'must not be blank: it has no character but white space or invisible ones' }] }));
    });

    it('rejects missing fields, an unknown entryType, a malformed entityType or source, and unknown fields', async () => {
      const missing = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ message: 'x' }).expect(400);
      expect(missing.body).toEqual(anError('VALIDATION_ERROR', {
        details: [{ path: '/entityType', message: 'is required' }, { path: '/entityId', message: 'is required' }],
      }));
      const entryType = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, entryType: 'alarm' }).expect(400);
      expect(entryType.body.details).toEqual([{ path: '/entryType', message: 'must be one of "comment", "note", "status"' }]);
      const entityType = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, entityType: 'Check In' }).expect(400);
      expect(entityType.body.details).toEqual([{ path: '/entityType', message: expect.stringContaining('pattern') }]);
      const source = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, source: '' }).expect(400);
      expect(source.body.details).toEqual([{ path: '/source', message: expect.stringContaining('pattern') }]);
      const unknown = await t.http.post('/v1/logs').set('Authorization', t.auth).send({ ...comment, updatedAt: '2026-01-01T00:00:00Z' }).expect(400);
      expect(unknown.body.details).toEqual([{ path: '/updatedAt', message: 'is not a known field' }]);
      expect(await t.db.knex('logs').where({ message: 'x' })).toHaveLength(0);
    });

    it('needs logs:write', async () => {
      const readOnly = await t.newKey({ scopes: ['logs:read'] });
      const res = await t.http.post('/v1/logs').set('Authorization', readOnly).send(comment).expect(403);
      expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
    });
  });

  describe('getLog', () => {
    it('reads an entry back, and answers 404 for an unknown id', async () => {
      const created = (await t.http.post('/v1/logs').set('Authorization', t.auth).send(comment).expect(201)).body;
      expect((await t.http.get(`/v1/logs/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);
      const missing = await t.http.get('/v1/logs/log_000000000000000000000000').set('Authorization', t.auth).expect(404);
      expect(missing.body).toEqual(anError('NOT_FOUND'));
    });
  });

  describe('append-only', () => {
    it('answers 405 with Allow: GET to PUT, PATCH and DELETE, and leaves the entry unchanged', async () => {
      const created = (await t.http.post('/v1/logs').set('Authorization', t.auth).send(comment).expect(201)).body;
      for (const method of ['put', 'patch', 'delete'] as const) {
        const res = await t.http[method](`/v1/logs/${created.id}`).set('Authorization', t.auth).send({ message: 'rewritten' }).expect(405);
        expect(res.headers.allow).toBe('GET');
        expect(res.body).toEqual(anError('METHOD_NOT_ALLOWED'));
      }
      expect((await t.http.get(`/v1/logs/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);
    });
  });

  describe('listLogs', () => {
    it("lists one entity's entries oldest first, and only that entity's", async () => {
      const entityId = 'chk_list00000000000000000000';
      const messages = ['arrived', 'gate locked', 'inspection started'];
      const created = [];
      for (const message of messages) created.push((await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId, message }).expect(201)).body);
      await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId: 'chk_someone_else', message: 'elsewhere' }).expect(201);
      await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'site', entityId, message: 'same id, other kind' }).expect(201);

      const res = await t.http.get(`/v1/logs?entityType=checkin&entityId=${entityId}`).set('Authorization', t.auth).expect(200);
      expect(res.body).toEqual({ data: created, nextCursor: null });
    });

    it('pages through every entry exactly once while entries are added', async () => {
      const entityId = 'chk_paging000000000000000000';
      const messages = Array.from({ length: 7 }, (_, i) => `entry ${i}`);
      for (const message of messages) await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId, message }).expect(201);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const url: string = `/v1/logs?entityType=checkin&entityId=${entityId}&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await t.http.get(url).set('Authorization', t.auth).expect(200);
        seen.push(...res.body.data.map((l: { message: string }) => l.message));
        cursor = res.body.nextCursor;
        if (pages++ === 0) await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId, message: 'added while paging' }).expect(201);
      } while (cursor);
      expect(seen).toEqual([...messages, 'added while paging']);
      expect(pages).toBe(3);
    });

    it('without limit a page holds 50 entries (the default the README and the contract give), then the cursor goes on', async () => {
      const entityId = 'chk_defaultlimit';
      for (let i = 0; i < 51; i++) await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId, message: `entry ${i}` }).expect(201);
      const first = await t.http.get(`/v1/logs?entityType=checkin&entityId=${entityId}`).set('Authorization', t.auth).expect(200);
      expect(first.body.data).toHaveLength(50);
      expect(first.body.nextCursor).toEqual(expect.any(String));
      const rest = await t.http.get(`/v1/logs?entityType=checkin&entityId=${entityId}&cursor=${first.body.nextCursor}`).set('Authorization', t.auth).expect(200);
      expect(rest.body).toMatchObject({ data: [{ message: 'entry 50' }], nextCursor: null });
    });

    it('requires entityType and entityId, and rejects a limit out of range and a malformed cursor', async () => {
      const missing = await t.http.get('/v1/logs').set('Authorization', t.auth).expect(400);
      expect(missing.body).toEqual(anError('VALIDATION_ERROR', {
        details: [{ path: '/query/entityType', message: 'is required' }, { path: '/query/entityId', message: 'is required' }],
      }));
      const base = '/v1/logs?entityType=checkin&entityId=chk_x';
      const zero = await t.http.get(`${base}&limit=0`).set('Authorization', t.auth).expect(400);
      expect(zero.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/limit', message: 'must be >= 1' }] }));
      const big = await t.http.get(`${base}&limit=501`).set('Authorization', t.auth).expect(400);
      expect(big.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/limit', message: 'must be <= 500' }] }));
      const cursor = await t.http.get(`${base}&cursor=bm90LWEtY3Vyc29y`).set('Authorization', t.auth).expect(400);
      expect(cursor.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: expect.any(String) }] }));
    });
  });

  describe('tenancy', () => {
    it("never shows another organization's entries", async () => {
      const other = await t.newKey({ organization: 'other-org-logs' });
      const entityId = 'chk_tenancy00000000000000000';
      const mine = (await t.http.post('/v1/logs').set('Authorization', t.auth).send({ entityType: 'checkin', entityId, message: 'mine' }).expect(201)).body;
      const missing = await t.http.get(`/v1/logs/${mine.id}`).set('Authorization', other).expect(404);
      expect(missing.body).toEqual(anError('NOT_FOUND'));
      const list = await t.http.get(`/v1/logs?entityType=checkin&entityId=${entityId}`).set('Authorization', other).expect(200);
      expect(list.body).toEqual({ data: [], nextCursor: null });
      const theirs = (await t.http.post('/v1/logs').set('Authorization', other).send({ entityType: 'checkin', entityId, message: 'theirs' }).expect(201)).body;
      const mineOnly = await t.http.get(`/v1/logs?entityType=checkin&entityId=${entityId}`).set('Authorization', t.auth).expect(200);
      expect(mineOnly.body).toEqual({ data: [mine], nextCursor: null });
      expect((await t.http.get(`/v1/logs?entityType=checkin&entityId=${entityId}`).set('Authorization', other).expect(200)).body.data).toEqual([theirs]);
    });
  });
});
