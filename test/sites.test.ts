import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';

const north = { name: 'North Substation', address: '1 Grid Road, Leeds', latitude: 53.8008, longitude: -1.5491, geofenceRadiusMeters: 150, timezone: 'Europe/London' };

describeEachDatabase('sites', (t) => {
  describe('createSite', () => {
    it('creates a site and answers 201 with Location', async () => {
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).send(north).expect(201);
      expect(res.body).toEqual({ id: anId('site'), ...north, createdAt: aTimestamp(), updatedAt: res.body.createdAt });
      expect(res.headers.location).toBe(`/v1/sites/${res.body.id}`);
      const stored = await t.db.knex('sites').where({ id: res.body.id }).first();
      expect(stored).toMatchObject({ name: north.name, geofence_radius_meters: 150, timezone: 'Europe/London' });
    });

    it('fills in the default radius and nulls', async () => {
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Depot' }).expect(201);
      expect(res.body).toEqual({
        id: anId('site'), name: 'Depot', address: null, latitude: null, longitude: null, geofenceRadiusMeters: 100, timezone: null,
        createdAt: aTimestamp(), updatedAt: aTimestamp(),
      });
    });

    it('rejects latitude without longitude (JSON Schema 2020-12 dependentRequired)', async () => {
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'X', latitude: 1 }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/longitude', message: 'is required when latitude is given' }] }));
    });

    it('rejects an unknown time zone and a radius out of range', async () => {
      const tz = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'X', timezone: 'Mars/Olympus' }).expect(400);
      expect(tz.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/timezone', message: expect.stringContaining('IANA') }] }));
      const radius = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'X', geofenceRadiusMeters: 5 }).expect(400);
      expect(radius.body.details).toEqual([{ path: '/geofenceRadiusMeters', message: 'must be >= 10' }]);
      expect(await t.db.knex('sites').where({ name: 'X' })).toHaveLength(0);
    });

    it('stores a time zone in its usual letter case, a link as sent (never renamed to an old name), on create and on change', async () => {
      const shouted = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Shouted', timezone: 'EUROPE/LONDON' }).expect(201)).body;
      expect(shouted.timezone).toBe('Europe/London');
      expect(await t.db.knex('sites').where({ id: shouted.id }).first('timezone')).toEqual({ timezone: 'Europe/London' });
      // links stay as written: the runtime's zone data would turn Asia/Kolkata into Asia/Calcutta
      for (const link of ['Asia/Kolkata', 'Europe/Kyiv', 'US/Eastern']) {
        expect((await t.http.patch(`/v1/sites/${shouted.id}`).set('Authorization', t.auth).send({ timezone: link }).expect(200)).body.timezone).toBe(link);
      }
      expect((await t.http.patch(`/v1/sites/${shouted.id}`).set('Authorization', t.auth).send({ timezone: 'utc' }).expect(200)).body.timezone).toBe('UTC');
      // the same zone written in another case is no change: nothing new in the feed
      const events = async () => (await t.http.get(`/v1/events?resourceId=${shouted.id}`).set('Authorization', t.auth).expect(200)).body.data.length;
      const before = await events();
      expect((await t.http.patch(`/v1/sites/${shouted.id}`).set('Authorization', t.auth).send({ timezone: 'Utc' }).expect(200)).body.timezone).toBe('UTC');
      expect(await events()).toBe(before);
    });
  });

  describe('getSite / updateSite / deleteSite', () => {
    it('reads, changes, clears and deletes a site', async () => {
      const created = (await t.http.post('/v1/sites').set('Authorization', t.auth).send(north).expect(201)).body;
      expect((await t.http.get(`/v1/sites/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);

      const updated = await t.http.patch(`/v1/sites/${created.id}`).set('Authorization', t.auth).send({ geofenceRadiusMeters: 250, address: null }).expect(200);
      expect(updated.body).toEqual({ ...created, geofenceRadiusMeters: 250, address: null, updatedAt: aTimestamp() });

      await t.http.delete(`/v1/sites/${created.id}`).set('Authorization', t.auth).expect(204);
      const gone = await t.http.get(`/v1/sites/${created.id}`).set('Authorization', t.auth).expect(404);
      expect(gone.body).toEqual(anError('NOT_FOUND'));
      await t.http.delete(`/v1/sites/${created.id}`).set('Authorization', t.auth).expect(404);
    });

    it('refuses a change that would leave one coordinate (a location is both or neither), and clears both', async () => {
      const created = (await t.http.post('/v1/sites').set('Authorization', t.auth).send(north).expect(201)).body;
      for (const [body, path] of [[{ latitude: 53.8, longitude: null }, '/longitude'], [{ latitude: null, longitude: -1.5 }, '/latitude']] as const) {
        const res = await t.http.patch(`/v1/sites/${created.id}`).set('Authorization', t.auth).send(body).expect(400);
        expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path, message: expect.stringContaining('a location has both coordinates or neither') }] }));
      }
      expect((await t.http.get(`/v1/sites/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);
      const cleared = (await t.http.patch(`/v1/sites/${created.id}`).set('Authorization', t.auth).send({ latitude: null, longitude: null }).expect(200)).body;
      expect(cleared).toMatchObject({ latitude: null, longitude: null });
    });

    it('rejects an empty update and a change of id', async () => {
      const created = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Y' }).expect(201)).body;
      await t.http.patch(`/v1/sites/${created.id}`).set('Authorization', t.auth).send({}).expect(400);
      const res = await t.http.patch(`/v1/sites/${created.id}`).set('Authorization', t.auth).send({ id: 'site_other' }).expect(400);
      expect(res.body.details).toEqual([{ path: '/id', message: 'is not a known field' }]);
    });
  });

  describe('listSites', () => {
    it('pages through every site exactly once, oldest first, while sites are added', async () => {
      const auth = await t.newKey({ organization: 'paging-sites' });
      const names = Array.from({ length: 7 }, (_, i) => `site ${i}`);
      for (const name of names) await t.http.post('/v1/sites').set('Authorization', auth).send({ name }).expect(201);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const url: string = `/v1/sites?limit=3${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await t.http.get(url).set('Authorization', auth).expect(200);
        seen.push(...res.body.data.map((s: { name: string }) => s.name));
        cursor = res.body.nextCursor;
        if (pages++ === 0) await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'added while paging' }).expect(201);
      } while (cursor);
      expect(seen).toEqual([...names, 'added while paging']);
    });

    it('rejects a limit out of range and a malformed cursor', async () => {
      const limit = await t.http.get('/v1/sites?limit=501').set('Authorization', t.auth).expect(400);
      expect(limit.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/limit', message: 'must be <= 500' }] }));
      const cursor = await t.http.get('/v1/sites?cursor=not-a-cursor').set('Authorization', t.auth).expect(400);
      expect(cursor.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: expect.any(String) }] }));
    });
  });

  describe('tenancy', () => {
    it("never shows another organization's site", async () => {
      const other = await t.newKey({ organization: 'other-org-sites' });
      const mine = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Mine' }).expect(201)).body;
      await t.http.get(`/v1/sites/${mine.id}`).set('Authorization', other).expect(404);
      await t.http.patch(`/v1/sites/${mine.id}`).set('Authorization', other).send({ name: 'Stolen' }).expect(404);
      await t.http.delete(`/v1/sites/${mine.id}`).set('Authorization', other).expect(404);
      const list = await t.http.get('/v1/sites').set('Authorization', other).expect(200);
      expect(list.body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get(`/v1/sites/${mine.id}`).set('Authorization', t.auth).expect(200)).body.name).toBe('Mine');
    });
  });
});
