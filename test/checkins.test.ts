import { describeEachDatabase, anId, aTimestamp, anError, TestContext } from './support/testApp';

// North Substation, Leeds, radius 150 m; `nearby` is 59.4 m from it, `farAway` 355.8 m
const north = { name: 'North Substation', address: '1 Grid Road, Leeds', latitude: 53.8008, longitude: -1.5491, geofenceRadiusMeters: 150 };
const nearby = { latitude: 53.8012, longitude: -1.5485, accuracyMeters: 12 };
const farAway = { latitude: 53.804, longitude: -1.5491, accuracyMeters: 10 };
const insideVerdict = { distanceFromSiteMeters: 59.4, withinGeofence: true, suspicious: false, suspicionReasons: [], geofenceStatus: 'computed' };
const noVerdict = (geofenceStatus: string) => ({ distanceFromSiteMeters: null, withinGeofence: null, suspicious: null, suspicionReasons: null, geofenceStatus });

const hoursFromNow = (hours: number) => new Date(Date.now() + hours * 3600_000).toISOString();

describeEachDatabase('checkins', (t) => {
  const post = (url: string, body: object, auth = t.auth) => t.http.post(url).set('Authorization', auth).send(body);
  const patch = (url: string, body: object, auth = t.auth) => t.http.patch(url).set('Authorization', auth).send(body);
  const newSite = async (body: object = north, auth = t.auth) => (await post('/v1/sites', body, auth).expect(201)).body as { id: string };
  const newUser = async (body: object, auth = t.auth) => (await post('/v1/users', body, auth).expect(201)).body as { id: string };
  const storedCheckin = (ctx: TestContext, id: string) => ctx.db.knex('checkins').where({ id }).first();
  const storedUser = (ctx: TestContext, id: string) => ctx.db.knex('users').where({ id }).first();

  describe('createCheckin', () => {
    it('plans a check-in (pre_checkin by default) and answers 201 with Location', async () => {
      const site = await newSite();
      const body = { userId: 'alice', siteId: site.id, arrivalWindowStartAt: '2026-11-22T08:00:00Z', arrivalWindowEndAt: '2026-11-22T10:00:00+01:00' };
      const res = await post('/v1/checkins', body).expect(201);
      expect(res.body).toEqual({
        id: anId('chk'),
        userId: 'alice',
        siteId: site.id,
        status: 'pre_checkin',
        arrivalWindowStartAt: '2026-11-22T08:00:00.000Z',
        arrivalWindowEndAt: '2026-11-22T09:00:00.000Z',
        coordinates: null,
        checkInAddress: null,
        checkOutAddress: null,
        checkedInAt: null,
        checkedOutAt: null,
        ...noVerdict('no_coordinates'),
        createdAt: aTimestamp(),
        updatedAt: res.body.createdAt,
      });
      expect(res.headers.location).toBe(`/v1/checkins/${res.body.id}`);
      expect(await storedCheckin(t, res.body.id)).toMatchObject({
        user_id: 'alice', site_id: site.id, status: 'pre_checkin', arrival_window_end_at: '2026-11-22T09:00:00.000Z', latitude: null, suspicion_reasons: null, geofence_status: 'no_coordinates',
      });
    });

    it('starts a walk-in check-in as active with coordinates: checkedInAt and the geofence verdict', async () => {
      const site = await newSite();
      const res = await post('/v1/checkins', { userId: 'bob', siteId: site.id, status: 'active', coordinates: nearby, checkInAddress: 'Gate 2' }).expect(201);
      expect(res.body).toEqual(expect.objectContaining({
        status: 'active', coordinates: nearby, checkInAddress: 'Gate 2', checkedInAt: res.body.createdAt, ...insideVerdict,
      }));
      expect(await storedCheckin(t, res.body.id)).toMatchObject({
        status: 'active', latitude: nearby.latitude, longitude: nearby.longitude, accuracy_meters: 12, distance_from_site_meters: 59.4, suspicion_reasons: '[]', geofence_status: 'computed',
      });
    });

    it('gives no verdict when the site does not exist, has no location, or there are no coordinates, and says which', async () => {
      const unknown = await post('/v1/checkins', { userId: 'carol', siteId: 'site_elsewhere', coordinates: nearby }).expect(201);
      expect(unknown.body).toEqual(expect.objectContaining({ siteId: 'site_elsewhere', coordinates: nearby, ...noVerdict('site_not_found') }));
      expect(await storedCheckin(t, unknown.body.id)).toMatchObject({ geofence_status: 'site_not_found' });
      const depot = await newSite({ name: 'Depot without location' });
      const noLocation = await post('/v1/checkins', { userId: 'carol', siteId: depot.id, coordinates: nearby }).expect(201);
      expect(noLocation.body).toEqual(expect.objectContaining(noVerdict('no_site_location')));
      const site = await newSite();
      const noCoordinates = await post('/v1/checkins', { userId: 'carol', siteId: site.id, status: 'active' }).expect(201);
      expect(noCoordinates.body).toEqual(expect.objectContaining({ coordinates: null, ...noVerdict('no_coordinates') }));
      // a site of another organization is no site of this one
      const elsewhere = await newSite(north, await t.newKey({ organization: 'other-geofence-org' }));
      const foreign = await post('/v1/checkins', { userId: 'carol', siteId: elsewhere.id, coordinates: nearby }).expect(201);
      expect(foreign.body).toEqual(expect.objectContaining(noVerdict('site_not_found')));
      // reads and lists show the same status as the write did
      expect((await t.http.get(`/v1/checkins/${noLocation.body.id}`).set('Authorization', t.auth).expect(200)).body.geofenceStatus).toBe('no_site_location');
      const listed = (await t.http.get('/v1/checkins?userId=carol').set('Authorization', t.auth).expect(200)).body.data;
      expect(listed.map((c: { geofenceStatus: string }) => c.geofenceStatus)).toEqual(['site_not_found', 'no_site_location', 'no_coordinates', 'site_not_found']);
    });

    it('moves from no_coordinates to a verdict when a position is reported, and back to a reason when the site has none', async () => {
      const site = await newSite();
      const planned = (await post('/v1/checkins', { userId: 'dora', siteId: site.id }).expect(201)).body;
      expect(planned.geofenceStatus).toBe('no_coordinates');
      const located = await patch(`/v1/checkins/${planned.id}`, { coordinates: nearby }).expect(200);
      expect(located.body).toEqual(expect.objectContaining(insideVerdict));
      // the site loses its location; the next reported position cannot be measured, and says so
      await patch(`/v1/sites/${site.id}`, { latitude: null, longitude: null }).expect(200);
      const again = await patch(`/v1/checkins/${planned.id}`, { coordinates: farAway }).expect(200);
      expect(again.body).toEqual(expect.objectContaining({ coordinates: farAway, ...noVerdict('no_site_location') }));
    });

    it('flags outside_geofence and low_accuracy but still creates the check-in', async () => {
      const site = await newSite();
      const res = await post('/v1/checkins', { userId: 'dan', siteId: site.id, coordinates: { ...farAway, accuracyMeters: 400 } }).expect(201);
      expect(res.body).toEqual(expect.objectContaining({
        distanceFromSiteMeters: 355.8, withinGeofence: false, suspicious: true, suspicionReasons: ['outside_geofence', 'low_accuracy'],
      }));
      expect(await storedCheckin(t, res.body.id)).toMatchObject({ suspicion_reasons: '["outside_geofence","low_accuracy"]' });
    });

    it('accepts coordinates without accuracy', async () => {
      const site = await newSite();
      const res = await post('/v1/checkins', { userId: 'dan', siteId: site.id, coordinates: { latitude: nearby.latitude, longitude: nearby.longitude } }).expect(201);
      expect(res.body).toEqual(expect.objectContaining({ coordinates: { ...nearby, accuracyMeters: null }, ...insideVerdict }));
    });

    it('rejects an arrival window that ends before it starts, naming the field, and stores nothing', async () => {
      const res = await post('/v1/checkins', {
        userId: 'window-check', siteId: 'site_x', arrivalWindowStartAt: '2026-11-22T09:00:00.000Z', arrivalWindowEndAt: '2026-11-22T09:30:00+01:00',
      }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/arrivalWindowEndAt', message: 'must not be before arrivalWindowStartAt' }] }));
      expect(await t.db.knex('checkins').where({ user_id: 'window-check' })).toHaveLength(0);
    });

    it('rejects missing fields, unknown fields, checked_out on create, and bad coordinates', async () => {
      const missing = await post('/v1/checkins', { userId: 'x' }).expect(400);
      expect(missing.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/siteId', message: 'is required' }] }));
      const unknown = await post('/v1/checkins', { userId: 'x', siteId: 's', checkedInAt: '2026-11-22T09:00:00Z' }).expect(400);
      expect(unknown.body.details).toEqual([{ path: '/checkedInAt', message: 'is not a known field' }]);
      const status = await post('/v1/checkins', { userId: 'x', siteId: 's', status: 'checked_out' }).expect(400);
      expect(status.body.details).toEqual([{ path: '/status', message: 'must be one of "pre_checkin", "active"' }]);
      const latitude = await post('/v1/checkins', { userId: 'x', siteId: 's', coordinates: { latitude: 91, longitude: 0 } }).expect(400);
      expect(latitude.body.details).toEqual([{ path: '/coordinates/latitude', message: 'must be <= 90' }]);
      const time = await post('/v1/checkins', { userId: 'x', siteId: 's', arrivalWindowStartAt: 'tomorrow' }).expect(400);
      expect(time.body.details).toEqual([{ path: '/arrivalWindowStartAt', message: expect.stringContaining('RFC 3339') }]);
      expect(await t.db.knex('checkins').where({ user_id: 'x' })).toHaveLength(0);
    });
  });

  describe("refreshing the user's last location", () => {
    it('a check-in created with coordinates refreshes the profile (site_checkin_created)', async () => {
      const site = await newSite();
      const user = await newUser({ userId: 'erin' });
      const checkin = (await post('/v1/checkins', { userId: 'erin', siteId: site.id, coordinates: nearby }).expect(201)).body;
      const profile = (await t.http.get(`/v1/users/${user.id}`).set('Authorization', t.auth).expect(200)).body;
      expect(profile).toEqual({
        id: user.id,
        userId: 'erin',
        lastLocationSiteId: site.id,
        lastLocationCheckinId: checkin.id,
        lastLocationLat: nearby.latitude,
        lastLocationLng: nearby.longitude,
        lastLocationAccuracyMeters: 12,
        lastLocationSource: 'site_checkin_created',
        lastLocationCapturedAt: checkin.createdAt,
        createdAt: aTimestamp(),
        updatedAt: checkin.createdAt,
      });
    });

    it('a planned check-in without coordinates leaves the profile alone', async () => {
      const user = await newUser({ userId: 'erin-2', lastLocationSource: 'manual' });
      await post('/v1/checkins', { userId: 'erin-2', siteId: 'site_any' }).expect(201);
      expect(await storedUser(t, user.id)).toMatchObject({ last_location_source: 'manual', last_location_checkin_id: null });
    });

    it('a walk-in refreshes the profile as an activation', async () => {
      const site = await newSite();
      const user = await newUser({ userId: 'frank' });
      const checkin = (await post('/v1/checkins', { userId: 'frank', siteId: site.id, status: 'active', coordinates: nearby }).expect(201)).body;
      expect(await storedUser(t, user.id)).toMatchObject({
        last_location_source: 'site_checkin_activated', last_location_checkin_id: checkin.id, last_location_site_id: site.id, last_location_captured_at: checkin.checkedInAt,
      });
    });

    it('without a profile for the userId nothing fails and no profile is created', async () => {
      const site = await newSite();
      const created = (await post('/v1/checkins', { userId: 'no-profile', siteId: site.id, coordinates: nearby }).expect(201)).body;
      await patch(`/v1/checkins/${created.id}`, { status: 'active' }).expect(200);
      expect(await t.db.knex('users').where({ user_id: 'no-profile' })).toHaveLength(0);
    });

    it('flags impossible travel from the previous last location, then records the new one', async () => {
      const site = await newSite();
      // London ten minutes ago, Leeds (272 km away) now
      const tenMinutesAgo = new Date(Date.now() - 10 * 60_000).toISOString();
      const user = await newUser({ userId: 'grace', lastLocationLat: 51.5074, lastLocationLng: -0.1278, lastLocationAccuracyMeters: 20, lastLocationSource: 'device', lastLocationCapturedAt: tenMinutesAgo });
      const res = await post('/v1/checkins', { userId: 'grace', siteId: site.id, status: 'active', coordinates: nearby }).expect(201);
      expect(res.body).toEqual(expect.objectContaining({ distanceFromSiteMeters: 59.4, withinGeofence: true, suspicious: true, suspicionReasons: ['impossible_travel'] }));
      expect(await storedUser(t, user.id)).toMatchObject({ last_location_lat: nearby.latitude, last_location_lng: nearby.longitude, last_location_source: 'site_checkin_activated' });
    });

    it('does not flag travel at a plausible speed', async () => {
      const site = await newSite();
      const threeHoursAgo = new Date(Date.now() - 3 * 3600_000).toISOString();
      await newUser({ userId: 'heidi', lastLocationLat: 51.5074, lastLocationLng: -0.1278, lastLocationCapturedAt: threeHoursAgo });
      const res = await post('/v1/checkins', { userId: 'heidi', siteId: site.id, status: 'active', coordinates: nearby }).expect(201);
      expect(res.body).toEqual(expect.objectContaining(insideVerdict));
    });
  });

  describe('updateCheckin', () => {
    it('walks pre_checkin → active → checked_out with server-set times, verdict and profile refresh', async () => {
      const site = await newSite();
      const user = await newUser({ userId: 'ivan' });
      const planned = (await post('/v1/checkins', { userId: 'ivan', siteId: site.id, arrivalWindowStartAt: hoursFromNow(-1), arrivalWindowEndAt: hoursFromNow(1) }).expect(201)).body;

      const active = await patch(`/v1/checkins/${planned.id}`, { status: 'active', coordinates: nearby, checkInAddress: '1 Grid Road' }).expect(200);
      expect(active.body).toEqual({
        ...planned, status: 'active', coordinates: nearby, checkInAddress: '1 Grid Road', checkedInAt: aTimestamp(), ...insideVerdict, updatedAt: active.body.checkedInAt,
      });
      expect(await storedUser(t, user.id)).toMatchObject({
        last_location_source: 'site_checkin_activated', last_location_checkin_id: planned.id, last_location_site_id: site.id,
        last_location_lat: nearby.latitude, last_location_lng: nearby.longitude, last_location_accuracy_meters: 12, last_location_captured_at: active.body.checkedInAt,
      });

      const done = await patch(`/v1/checkins/${planned.id}`, { status: 'checked_out', checkOutAddress: 'Gate 3' }).expect(200);
      expect(done.body).toEqual({ ...active.body, status: 'checked_out', checkOutAddress: 'Gate 3', checkedOutAt: aTimestamp(), updatedAt: done.body.checkedOutAt });
      expect(await storedCheckin(t, planned.id)).toMatchObject({ status: 'checked_out', checked_out_at: done.body.checkedOutAt, check_out_address: 'Gate 3' });
      expect((await t.http.get(`/v1/checkins/${planned.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(done.body);
    });

    it('activation uses the stored coordinates when none are sent, and flags an activation outside the arrival window', async () => {
      const site = await newSite();
      const planned = (await post('/v1/checkins', { userId: 'judy', siteId: site.id, coordinates: nearby, arrivalWindowStartAt: hoursFromNow(2), arrivalWindowEndAt: hoursFromNow(3) }).expect(201)).body;
      expect(planned).toEqual(expect.objectContaining(insideVerdict));
      const active = await patch(`/v1/checkins/${planned.id}`, { status: 'active' }).expect(200);
      expect(active.body).toEqual(expect.objectContaining({
        status: 'active', coordinates: nearby, distanceFromSiteMeters: 59.4, withinGeofence: true, suspicious: true, suspicionReasons: ['outside_arrival_window'],
      }));
    });

    it('re-sending the current status updates addresses and coordinates (and recomputes the verdict)', async () => {
      const site = await newSite();
      const created = (await post('/v1/checkins', { userId: 'ken', siteId: site.id, status: 'active', coordinates: nearby }).expect(201)).body;
      const moved = await patch(`/v1/checkins/${created.id}`, { status: 'active', coordinates: farAway, checkInAddress: 'Back gate' }).expect(200);
      expect(moved.body).toEqual({
        ...created, coordinates: farAway, checkInAddress: 'Back gate',
        distanceFromSiteMeters: 355.8, withinGeofence: false, suspicious: true, suspicionReasons: ['outside_geofence'], updatedAt: aTimestamp(),
      });
      expect(moved.body.checkedInAt).toBe(created.checkedInAt);
      const addressOnly = await patch(`/v1/checkins/${created.id}`, { checkOutAddress: 'Later' }).expect(200);
      expect(addressOnly.body).toEqual({ ...moved.body, checkOutAddress: 'Later', updatedAt: aTimestamp() });
    });

    it('a position on the way (pre_checkin) gets a verdict but does not refresh the profile', async () => {
      const site = await newSite();
      const user = await newUser({ userId: 'leo' });
      const planned = (await post('/v1/checkins', { userId: 'leo', siteId: site.id }).expect(201)).body;
      const res = await patch(`/v1/checkins/${planned.id}`, { coordinates: farAway }).expect(200);
      expect(res.body).toEqual({ ...planned, coordinates: farAway, distanceFromSiteMeters: 355.8, withinGeofence: false, suspicious: true, suspicionReasons: ['outside_geofence'], geofenceStatus: 'computed', updatedAt: aTimestamp() });
      expect(await storedUser(t, user.id)).toMatchObject({ last_location_source: null, last_location_checkin_id: null });
    });

    it.each([
      ['pre_checkin', 'checked_out', 'skipping active'],
      ['active', 'pre_checkin', 'going backwards'],
      ['checked_out', 'active', 'leaving checked_out'],
      ['checked_out', 'pre_checkin', 'leaving checked_out for the start'],
    ])('refuses %s → %s (%s) with 409 INVALID_TRANSITION and leaves the record unchanged', async (from, to) => {
      const created = (await post('/v1/checkins', { userId: 'mia', siteId: 'site_any', status: from === 'pre_checkin' ? 'pre_checkin' : 'active' }).expect(201)).body;
      if (from === 'checked_out') await patch(`/v1/checkins/${created.id}`, { status: 'checked_out' }).expect(200);
      const before = await storedCheckin(t, created.id);
      const res = await patch(`/v1/checkins/${created.id}`, { status: to, coordinates: farAway, checkOutAddress: 'Nope' }).expect(409);
      expect(res.body).toEqual(anError('INVALID_TRANSITION'));
      expect(await storedCheckin(t, created.id)).toEqual(before);
    });

    it('concurrent writes neither both win nor undo each other: a re-sent active racing a check-out never moves it back nor loses its address', async () => {
      // On Postgres the two run at once on two connections, and only the write's compare-and-set
      // (status and updatedAt) keeps either from undoing the other (without it this fails);
      // SQLite runs one write transaction of a process at a time.
      const site = await newSite();
      const pairs = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
        const checkin = (await post('/v1/checkins', { userId: `auth0|race-${i}`, siteId: site.id, status: 'active', coordinates: nearby }).expect(201)).body;
        // sent together: the check-out, and a re-send of `active` with a new address
        const [out, resend] = await Promise.all([
          patch(`/v1/checkins/${checkin.id}`, { status: 'checked_out' }),
          patch(`/v1/checkins/${checkin.id}`, { status: 'active', checkInAddress: `Gate ${i}` }),
        ]);
        return { id: checkin.id, i, out, resend };
      }));
      for (const { id, i, out, resend } of pairs) {
        expect(out.status).toBe(200);
        expect(out.body.status).toBe('checked_out');
        // the re-send either ran first — and the check-out, applied after it, kept its address — or
        // came after the check-out and was refused, changing nothing
        const stored = await storedCheckin(t, id);
        if (resend.status === 200) {
          expect(resend.body.status).toBe('active');
          expect(stored.check_in_address).toBe(`Gate ${i}`);
        } else {
          expect(resend.body).toEqual(anError('INVALID_TRANSITION'));
          expect(stored.check_in_address).toBeNull();
        }
        expect(stored.status).toBe('checked_out');
        expect((await t.http.get(`/v1/checkins/${id}`).set('Authorization', t.auth).expect(200)).body.status).toBe('checked_out');
      }
    });

    it('replays a stored INVALID_TRANSITION for the same Idempotency-Key', async () => {
      const created = (await post('/v1/checkins', { userId: 'nina', siteId: 'site_any' }).expect(201)).body;
      const first = await patch(`/v1/checkins/${created.id}`, { status: 'checked_out' }).set('Idempotency-Key', 'skip-1').expect(409);
      const again = await patch(`/v1/checkins/${created.id}`, { status: 'checked_out' }).set('Idempotency-Key', 'skip-1').expect(409);
      expect(again.body).toEqual(first.body);
      expect(again.headers['idempotent-replayed']).toBe('true');
    });

    it('answers 404 for an unknown id and 400 for an empty or unknown-field update', async () => {
      expect((await patch('/v1/checkins/chk_000000000000000000000000', { status: 'active' }).expect(404)).body).toEqual(anError('NOT_FOUND'));
      const created = (await post('/v1/checkins', { userId: 'olga', siteId: 'site_any' }).expect(201)).body;
      await patch(`/v1/checkins/${created.id}`, {}).expect(400);
      const unknown = await patch(`/v1/checkins/${created.id}`, { siteId: 'site_other' }).expect(400);
      expect(unknown.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/siteId', message: 'is not a known field' }] }));
      expect(await storedCheckin(t, created.id)).toMatchObject({ site_id: 'site_any', status: 'pre_checkin' });
    });
  });

  describe('getCheckin', () => {
    it('reads a check-in and answers 404 for an unknown one', async () => {
      const created = (await post('/v1/checkins', { userId: 'pat', siteId: 'site_any' }).expect(201)).body;
      expect((await t.http.get(`/v1/checkins/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);
      expect((await t.http.get('/v1/checkins/chk_000000000000000000000000').set('Authorization', t.auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
    });
  });

  describe('listCheckins', () => {
    it('lists oldest first, pages exactly once, and filters by userId, siteId and status (combined)', async () => {
      const auth = await t.newKey({ organization: 'checkins-paging' });
      const plan = [
        { userId: 'u1', siteId: 's1', status: 'pre_checkin' },
        { userId: 'u2', siteId: 's1', status: 'active' },
        { userId: 'u1', siteId: 's2', status: 'active' },
        { userId: 'u1', siteId: 's1', status: 'active' },
        { userId: 'u2', siteId: 's2', status: 'pre_checkin' },
      ];
      const ids: string[] = [];
      for (const body of plan) ids.push((await post('/v1/checkins', body, auth).expect(201)).body.id);

      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res: { body: { data: { id: string }[]; nextCursor: string | null } } = await t.http
          .get(`/v1/checkins?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
          .set('Authorization', auth)
          .expect(200);
        seen.push(...res.body.data.map((c) => c.id));
        cursor = res.body.nextCursor;
      } while (cursor);
      expect(seen).toEqual(ids);

      const idsOf = async (query: string) => ((await t.http.get(`/v1/checkins?${query}`).set('Authorization', auth).expect(200)).body.data as { id: string }[]).map((c) => c.id);
      expect(await idsOf('userId=u1')).toEqual([ids[0], ids[2], ids[3]]);
      expect(await idsOf('siteId=s2')).toEqual([ids[2], ids[4]]);
      expect(await idsOf('status=active')).toEqual([ids[1], ids[2], ids[3]]);
      expect(await idsOf('userId=u1&siteId=s1&status=active')).toEqual([ids[3]]);

      const one = await t.http.get('/v1/checkins?userId=u2&status=pre_checkin').set('Authorization', auth).expect(200);
      expect(one.body).toEqual({
        data: [expect.objectContaining({ id: ids[4], userId: 'u2', siteId: 's2', status: 'pre_checkin', createdAt: aTimestamp() })],
        nextCursor: null,
      });
    });

    it('rejects an unknown status filter and a malformed cursor', async () => {
      const status = await t.http.get('/v1/checkins?status=gone').set('Authorization', t.auth).expect(400);
      expect(status.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/status', message: expect.stringContaining('must be one of') }] }));
      await t.http.get('/v1/checkins?cursor=bogus').set('Authorization', t.auth).expect(400);
    });
  });

  describe('tenancy', () => {
    it("never shows another organization's check-in, nor uses its site or profile", async () => {
      const other = await t.newKey({ organization: 'checkins-other-org' });
      const mine = (await post('/v1/checkins', { userId: 'quinn', siteId: 'site_any' }).expect(201)).body;
      await t.http.get(`/v1/checkins/${mine.id}`).set('Authorization', other).expect(404);
      await patch(`/v1/checkins/${mine.id}`, { status: 'active' }, other).expect(404);
      expect((await t.http.get('/v1/checkins').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get('/v1/checkins?userId=quinn').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect(await storedCheckin(t, mine.id)).toMatchObject({ status: 'pre_checkin' });

      // my site and my profile give the other organization's check-in no verdict and no refresh
      const site = await newSite();
      const user = await newUser({ userId: 'quinn' });
      const theirs = await post('/v1/checkins', { userId: 'quinn', siteId: site.id, status: 'active', coordinates: nearby }, other).expect(201);
      expect(theirs.body).toEqual(expect.objectContaining(noVerdict('site_not_found')));
      expect(await storedUser(t, user.id)).toMatchObject({ last_location_checkin_id: null });
    });
  });
});
