import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';

const emptyLocation = {
  lastLocationSiteId: null,
  lastLocationCheckinId: null,
  lastLocationLat: null,
  lastLocationLng: null,
  lastLocationAccuracyMeters: null,
  lastLocationSource: null,
  lastLocationCapturedAt: null,
};

describeEachDatabase('users', (t) => {
  describe('createUser', () => {
    it('creates a profile with only a userId and answers 201 with Location', async () => {
      const res = await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'auth0|alice' }).expect(201);
      expect(res.body).toEqual({ id: anId('usr'), userId: 'auth0|alice', ...emptyLocation, createdAt: aTimestamp(), updatedAt: res.body.createdAt });
      expect(res.headers.location).toBe(`/v1/users/${res.body.id}`);
      const stored = await t.db.knex('users').where({ id: res.body.id }).first();
      expect(stored).toMatchObject({ user_id: 'auth0|alice', last_location_lat: null, last_location_source: null });
    });

    it('stores the last-location fields sent, normalizing the time to UTC with milliseconds', async () => {
      const body = {
        userId: 'bob',
        lastLocationSiteId: 'site_abc',
        lastLocationCheckinId: 'chk_abc',
        lastLocationLat: 53.8,
        lastLocationLng: -1.55,
        lastLocationAccuracyMeters: 8.5,
        lastLocationSource: 'manual',
        lastLocationCapturedAt: '2026-11-22T09:19:50+05:00',
      };
      const res = await t.http.post('/v1/users').set('Authorization', t.auth).send(body).expect(201);
      expect(res.body).toEqual({
        id: anId('usr'), ...body, lastLocationCapturedAt: '2026-11-22T04:19:50.000Z', createdAt: aTimestamp(), updatedAt: aTimestamp(),
      });
      const stored = await t.db.knex('users').where({ id: res.body.id }).first();
      expect(stored).toMatchObject({ last_location_lat: 53.8, last_location_lng: -1.55, last_location_captured_at: '2026-11-22T04:19:50.000Z' });
    });

    it('answers 409 ALREADY_EXISTS for a second profile of the same userId, and stores nothing', async () => {
      await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'dup' }).expect(201);
      const res = await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'dup', lastLocationSource: 'manual' }).expect(409);
      expect(res.body).toEqual(anError('ALREADY_EXISTS'));
      expect(await t.db.knex('users').where({ user_id: 'dup' })).toHaveLength(1);
    });

    it('allows the same userId in another organization', async () => {
      const other = await t.newKey({ organization: 'users-other-org-dup' });
      await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'shared-identity' }).expect(201);
      await t.http.post('/v1/users').set('Authorization', other).send({ userId: 'shared-identity' }).expect(201);
    });

    it('rejects a missing userId, an unknown field, an unknown source and a latitude without longitude', async () => {
      const missing = await t.http.post('/v1/users').set('Authorization', t.auth).send({}).expect(400);
      expect(missing.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/userId', message: 'is required' }] }));
      const unknown = await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'x', name: 'X' }).expect(400);
      expect(unknown.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/name', message: 'is not a known field' }] }));
      const source = await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'x', lastLocationSource: 'teleport' }).expect(400);
      expect(source.body.details).toEqual([{ path: '/lastLocationSource', message: expect.stringContaining('must be one of') }]);
      const lat = await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'x', lastLocationLat: 1 }).expect(400);
      expect(lat.body.details).toEqual([{ path: '/lastLocationLng', message: 'is required when lastLocationLat is given' }]);
      expect(await t.db.knex('users').where({ user_id: 'x' })).toHaveLength(0);
    });

    it('replays the first answer for the same Idempotency-Key', async () => {
      const first = await t.http.post('/v1/users').set('Authorization', t.auth).set('Idempotency-Key', 'create-carol').send({ userId: 'carol' }).expect(201);
      const again = await t.http.post('/v1/users').set('Authorization', t.auth).set('Idempotency-Key', 'create-carol').send({ userId: 'carol' }).expect(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(await t.db.knex('users').where({ user_id: 'carol' })).toHaveLength(1);
    });

    it('needs the users:write scope', async () => {
      const readOnly = await t.newKey({ scopes: ['users:read'] });
      const res = await t.http.post('/v1/users').set('Authorization', readOnly).send({ userId: 'nope' }).expect(403);
      expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
    });
  });

  describe('getUser / updateUser', () => {
    it('reads a profile, sets and clears last-location fields', async () => {
      const created = (await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'dave' }).expect(201)).body;
      expect((await t.http.get(`/v1/users/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);

      const location = {
        lastLocationSiteId: 'site_x',
        lastLocationCheckinId: 'chk_x',
        lastLocationLat: 51.5,
        lastLocationLng: -0.12,
        lastLocationAccuracyMeters: 5,
        lastLocationSource: 'device',
        lastLocationCapturedAt: '2026-11-22T04:19:50.123Z',
      };
      const updated = await t.http.patch(`/v1/users/${created.id}`).set('Authorization', t.auth).send(location).expect(200);
      expect(updated.body).toEqual({ ...created, ...location, updatedAt: aTimestamp() });

      const cleared = await t.http.patch(`/v1/users/${created.id}`).set('Authorization', t.auth).send({ lastLocationLat: null, lastLocationLng: null }).expect(200);
      expect(cleared.body).toEqual({ ...updated.body, lastLocationLat: null, lastLocationLng: null, updatedAt: aTimestamp() });
      const stored = await t.db.knex('users').where({ id: created.id }).first();
      expect(stored).toMatchObject({ user_id: 'dave', last_location_lat: null, last_location_lng: null, last_location_source: 'device', last_location_site_id: 'site_x' });
    });

    it('refuses to change userId, and an empty update', async () => {
      const created = (await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'erin' }).expect(201)).body;
      const res = await t.http.patch(`/v1/users/${created.id}`).set('Authorization', t.auth).send({ userId: 'mallory' }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/userId', message: 'is not a known field' }] }));
      await t.http.patch(`/v1/users/${created.id}`).set('Authorization', t.auth).send({}).expect(400);
      expect((await t.db.knex('users').where({ id: created.id }).first()).user_id).toBe('erin');
    });

    it('answers 404 for an unknown id, and for a userId used as the id', async () => {
      await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'frank' }).expect(201);
      expect((await t.http.get('/v1/users/usr_000000000000000000000000').set('Authorization', t.auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
      await t.http.get('/v1/users/frank').set('Authorization', t.auth).expect(404);
      await t.http.patch('/v1/users/usr_000000000000000000000000').set('Authorization', t.auth).send({ lastLocationSiteId: 's' }).expect(404);
    });
  });

  describe('listUsers', () => {
    it('lists oldest first, pages exactly once, and filters by userId', async () => {
      const auth = await t.newKey({ organization: 'users-paging' });
      const ids: string[] = [];
      for (const userId of ['u1', 'u2', 'u3', 'u4', 'u5']) {
        ids.push((await t.http.post('/v1/users').set('Authorization', auth).send({ userId }).expect(201)).body.id);
      }
      const first = await t.http.get('/v1/users?limit=2').set('Authorization', auth).expect(200);
      expect(first.body).toEqual({ data: [expect.objectContaining({ id: ids[0], userId: 'u1' }), expect.objectContaining({ id: ids[1] })], nextCursor: expect.any(String) });
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res: { body: { data: { id: string }[]; nextCursor: string | null } } = await t.http
          .get(`/v1/users?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
          .set('Authorization', auth)
          .expect(200);
        seen.push(...res.body.data.map((u) => u.id));
        cursor = res.body.nextCursor;
      } while (cursor);
      expect(seen).toEqual(ids);

      const filtered = await t.http.get('/v1/users?userId=u3').set('Authorization', auth).expect(200);
      expect(filtered.body).toEqual({
        data: [{ id: ids[2], userId: 'u3', ...emptyLocation, createdAt: aTimestamp(), updatedAt: aTimestamp() }],
        nextCursor: null,
      });
      expect((await t.http.get('/v1/users?userId=nobody').set('Authorization', auth).expect(200)).body).toEqual({ data: [], nextCursor: null });
    });

    it('rejects a limit out of range and an empty userId filter', async () => {
      await t.http.get('/v1/users?limit=0').set('Authorization', t.auth).expect(400);
      const res = await t.http.get('/v1/users?userId=').set('Authorization', t.auth).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/userId', message: expect.any(String) }] }));
    });
  });

  describe('tenancy', () => {
    it("never shows another organization's profile", async () => {
      const other = await t.newKey({ organization: 'users-other-org' });
      const mine = (await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'grace' }).expect(201)).body;
      await t.http.get(`/v1/users/${mine.id}`).set('Authorization', other).expect(404);
      await t.http.patch(`/v1/users/${mine.id}`).set('Authorization', other).send({ lastLocationSiteId: 'stolen' }).expect(404);
      expect((await t.http.get('/v1/users').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get('/v1/users?userId=grace').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get(`/v1/users/${mine.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(mine);
    });
  });
});
