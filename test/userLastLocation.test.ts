import { describeEachDatabase, aTimestamp, anError, TestContext } from './support/testApp';

// PATCH /v1/users/{id} takes any subset of the last-location fields; what stays paired is the
// stored location (both coordinates or neither).

describeEachDatabase('user last location: any subset of the fields', (t) => {
  const patch = (id: string, body: object) => t.http.patch(`/v1/users/${id}`).set('Authorization', t.auth).send(body);
  const newUser = async (body: object) => (await t.http.post('/v1/users').set('Authorization', t.auth).send(body).expect(201)).body;
  const stored = (ctx: TestContext, id: string) => ctx.db.knex('users').where({ id }).first();

  it('answers 404 for an unknown id whichever subset is sent, one coordinate included', async () => {
    for (const body of [{ lastLocationLat: 53.8 }, { lastLocationLng: -1.5 }, { lastLocationLat: null }, { lastLocationLat: 1, lastLocationLng: null }, { lastLocationSource: 'manual' }]) {
      expect((await patch('usr_000000000000000000000000', body).expect(404)).body).toEqual(anError('NOT_FOUND'));
    }
  });

  it('moves one coordinate of a stored location alone, and sets the other fields alone', async () => {
    const user = await newUser({ userId: 'gina', lastLocationLat: 53.8, lastLocationLng: -1.55 });
    const lat = await patch(user.id, { lastLocationLat: 53.81 }).expect(200);
    expect(lat.body).toEqual({ ...user, lastLocationLat: 53.81, updatedAt: aTimestamp() });
    const lng = await patch(user.id, { lastLocationLng: -1.56 }).expect(200);
    expect(lng.body).toEqual({ ...lat.body, lastLocationLng: -1.56, updatedAt: aTimestamp() });
    const accuracy = await patch(user.id, { lastLocationAccuracyMeters: 4 }).expect(200);
    expect(accuracy.body).toEqual({ ...lng.body, lastLocationAccuracyMeters: 4, updatedAt: aTimestamp() });
    const source = await patch(user.id, { lastLocationSource: 'manual', lastLocationCapturedAt: '2026-11-22T09:00:00+01:00' }).expect(200);
    expect(source.body).toEqual({ ...accuracy.body, lastLocationSource: 'manual', lastLocationCapturedAt: '2026-11-22T08:00:00.000Z', updatedAt: aTimestamp() });
    expect(await stored(t, user.id)).toMatchObject({ last_location_lat: 53.81, last_location_lng: -1.56, last_location_accuracy_meters: 4 });
  });

  it('refuses a change that would store half a location, naming the missing coordinate, and changes nothing', async () => {
    const empty = await newUser({ userId: 'hank' });
    const onlyLat = await patch(empty.id, { lastLocationLat: 53.8 }).expect(400);
    expect(onlyLat.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/lastLocationLng', message: expect.stringContaining('is required') }] }));
    const onlyLng = await patch(empty.id, { lastLocationLng: -1.5, lastLocationSource: 'device' }).expect(400);
    expect(onlyLng.body.details).toEqual([{ path: '/lastLocationLat', message: expect.stringContaining('is required') }]);
    expect(await stored(t, empty.id)).toMatchObject({ last_location_lat: null, last_location_lng: null, last_location_source: null, updated_at: empty.updatedAt });

    const located = await newUser({ userId: 'iris', lastLocationLat: 53.8, lastLocationLng: -1.55 });
    const clearOne = await patch(located.id, { lastLocationLat: null }).expect(400);
    expect(clearOne.body.details).toEqual([{ path: '/lastLocationLng', message: expect.stringContaining('must be cleared too') }]);
    const mixed = await patch(located.id, { lastLocationLat: 1, lastLocationLng: null }).expect(400);
    expect(mixed.body.details).toEqual([{ path: '/lastLocationLng', message: 'must not be null while lastLocationLat is set: a location has both coordinates or neither' }]);
    expect(await stored(t, located.id)).toMatchObject({ last_location_lat: 53.8, last_location_lng: -1.55 });

    // clearing both, and setting both, are always fine
    await patch(located.id, { lastLocationLat: null, lastLocationLng: null }).expect(200);
    expect((await patch(empty.id, { lastLocationLat: 1, lastLocationLng: 2 }).expect(200)).body).toEqual(expect.objectContaining({ lastLocationLat: 1, lastLocationLng: 2 }));
  });

  it("keeps another organization's profile out of reach (404, not 400)", async () => {
    const theirs = (await t.http.post('/v1/users').set('Authorization', await t.newKey({ organization: 'other-location-org' })).send({ userId: 'jo' }).expect(201)).body;
    await patch(theirs.id, { lastLocationLat: 10 }).expect(404);
  });
});
