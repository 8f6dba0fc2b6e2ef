import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';

const site = 'site_8f3k2m9q4t7w1x5z6c0v2b8n';

function reading(overrides: Record<string, unknown> = {}) {
  return { provider: 'acme-iot', sensorExternalId: 'th-0042', sensorName: 'Transformer room', siteId: site, metric: 'temperature_c', value: 21.4, unit: 'C', occurredAt: '2026-11-22T04:00:00.000Z', ...overrides };
}

/** `n` distinct readings of one sensor, one minute apart from `start`. */
function series(n: number, { start = Date.UTC(2026, 0, 1), ...overrides }: { start?: number } & Record<string, unknown> = {}) {
  return Array.from({ length: n }, (_, i) => reading({ occurredAt: new Date(start + i * 60_000).toISOString(), value: i / 10, ...overrides }));
}

/** The API representation of an input reading as stored. */
function stored(input: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const { sensorName, occurredAt, ...rest } = input;
  return { id: anId('srd'), ...rest, sensorName: sensorName ?? null, occurredAt: new Date(occurredAt as string).toISOString(), createdAt: aTimestamp(), ...extra };
}

describeEachDatabase('sensor readings', (t) => {
  const count = async (where: Record<string, unknown> = {}) => Number((await t.db.knex('sensor_readings').where(where).count({ n: '*' }))[0].n);

  describe('ingestSensorReadings', () => {
    it('stores a batch and answers 201 with every reading and its id', async () => {
      const auth = await t.newKey({ organization: 'ingest-basic' });
      const temperature = reading();
      const humidity = reading({ sensorName: undefined, metric: 'humidity_pct', value: 48, unit: '%', occurredAt: '2026-11-22T05:00:00+01:00' });
      delete (humidity as Record<string, unknown>).sensorName;
      const res = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: [temperature, humidity] }).expect(201);
      expect(res.body).toEqual({
        ingested: 2,
        duplicates: 0,
        data: [stored(temperature, { duplicate: false }), stored(humidity, { duplicate: false })],
      });
      expect(res.body.data[1].occurredAt).toBe('2026-11-22T04:00:00.000Z');
      const rows = await t.db.knex('sensor_readings').whereIn('id', res.body.data.map((r: { id: string }) => r.id)).orderBy('metric');
      expect(rows.map((r) => ({ ...r, value: Number(r.value) }))).toEqual([
        expect.objectContaining({ id: res.body.data[1].id, sensor_name: null, metric: 'humidity_pct', value: 48, unit: '%', occurred_at: '2026-11-22T04:00:00.000Z' }),
        expect.objectContaining({ id: res.body.data[0].id, provider: 'acme-iot', sensor_external_id: 'th-0042', sensor_name: 'Transformer room', site_id: site, metric: 'temperature_c', value: 21.4, unit: 'C', occurred_at: '2026-11-22T04:00:00.000Z' }),
      ]);
      // the representation answered at ingestion is the one read back
      expect((await t.http.get(`/v1/sensor-readings/${res.body.data[0].id}`).set('Authorization', auth).expect(200)).body)
        .toEqual({ ...res.body.data[0], duplicate: undefined });
    });

    it('stores nothing new when the same batch is sent again, and answers the stored readings', async () => {
      const auth = await t.newKey({ organization: 'ingest-resend' });
      const batch = series(3);
      const first = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: batch }).expect(201);
      const again = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: batch.map((r) => ({ ...r, value: 99 })) }).expect(201);
      expect(again.body).toEqual({
        ingested: 0,
        duplicates: 3,
        // the values first stored, not the ones just sent
        data: first.body.data.map((r: Record<string, unknown>) => ({ ...r, duplicate: true })),
      });
      const orgId = (await t.db.knex('organizations').where({ name: 'ingest-resend' }).first()).id;
      expect(await count({ org_id: orgId })).toBe(3);
    });

    it('deduplicates inside one batch and against stored readings, comparing occurredAt as an instant', async () => {
      const auth = await t.newKey({ organization: 'ingest-dedup' });
      const old = reading({ occurredAt: '2026-03-01T10:00:00Z' });
      const first = (await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: [old] }).expect(201)).body.data[0];

      const fresh = reading({ occurredAt: '2026-03-01T10:01:00Z' });
      const batch = [
        fresh,
        reading({ occurredAt: '2026-03-01T11:00:00+01:00', value: 1 }), // the stored one, another offset
        reading({ occurredAt: '2026-03-01T10:01:00.000Z', value: 2 }), // repeats `fresh`
        reading({ occurredAt: '2026-03-01T10:01:00Z', metric: 'humidity_pct', unit: '%' }), // another metric: distinct
        reading({ occurredAt: '2026-03-01T10:01:00Z', sensorExternalId: 'th-0043' }), // another sensor: distinct
        reading({ occurredAt: '2026-03-01T10:01:00Z', provider: 'other-iot' }), // another provider: distinct
      ];
      const res = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: batch }).expect(201);
      expect(res.body.ingested).toBe(4);
      expect(res.body.duplicates).toBe(2);
      expect(res.body.data).toEqual([
        stored(fresh, { duplicate: false }),
        { ...first, duplicate: true },
        { ...res.body.data[0], duplicate: true },
        stored(batch[3], { duplicate: false }),
        stored(batch[4], { duplicate: false }),
        stored(batch[5], { duplicate: false }),
      ]);
      const orgId = (await t.db.knex('organizations').where({ name: 'ingest-dedup' }).first()).id;
      expect(await count({ org_id: orgId })).toBe(5);
    });

    it('deduplicates per organization: the same reading in two organizations is stored twice', async () => {
      const a = await t.newKey({ organization: 'dedup-org-a' });
      const b = await t.newKey({ organization: 'dedup-org-b' });
      const one = reading({ occurredAt: '2026-04-01T00:00:00Z' });
      const fromA = await t.http.post('/v1/sensor-readings').set('Authorization', a).send({ readings: [one] }).expect(201);
      const fromB = await t.http.post('/v1/sensor-readings').set('Authorization', b).send({ readings: [one] }).expect(201);
      expect([fromA.body.ingested, fromB.body.ingested]).toEqual([1, 1]);
      expect(fromB.body.data[0].id).not.toBe(fromA.body.data[0].id);
    });

    it('stores each reading once when overlapping batches arrive at the same time', async () => {
      const auth = await t.newKey({ organization: 'ingest-concurrent' });
      const shared = series(900, { start: Date.UTC(2026, 2, 1) });
      const a = [...shared, ...series(100, { start: Date.UTC(2026, 3, 1) })];
      const b = [...series(100, { start: Date.UTC(2026, 4, 1) }), ...shared.slice().reverse()];
      const second = t.anotherApp();
      const [ra, rb] = await Promise.all([
        t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: a }),
        second.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: b }),
      ]);
      expect([ra.status, rb.status]).toEqual([201, 201]);
      expect(ra.body.ingested + rb.body.ingested).toBe(1100);
      expect(ra.body.duplicates + rb.body.duplicates).toBe(900);
      const orgId = (await t.db.knex('organizations').where({ name: 'ingest-concurrent' }).first()).id;
      expect(await count({ org_id: orgId })).toBe(1100);
    });

    it('stores a batch of 1000 readings in one request (past the 500-row statement limit)', async () => {
      const auth = await t.newKey({ organization: 'ingest-1000' });
      const batch = series(1000);
      const res = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: batch }).expect(201);
      expect(res.body.ingested).toBe(1000);
      expect(res.body.duplicates).toBe(0);
      expect(res.body.data).toHaveLength(1000);
      expect(res.body.data[999]).toEqual(stored(batch[999], { duplicate: false }));
      expect(new Set(res.body.data.map((r: { id: string }) => r.id)).size).toBe(1000);
      const orgId = (await t.db.knex('organizations').where({ name: 'ingest-1000' }).first()).id;
      expect(await count({ org_id: orgId })).toBe(1000);

      // half old, half new: the duplicates are read back across statement chunks
      const overlap = series(1000, { start: Date.UTC(2026, 0, 1) + 500 * 60_000 });
      const again = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: overlap }).expect(201);
      expect([again.body.ingested, again.body.duplicates]).toEqual([500, 500]);
      expect(again.body.data[0]).toEqual({ ...res.body.data[500], duplicate: true });
      expect(again.body.data[499]).toEqual({ ...res.body.data[999], duplicate: true });
      expect(again.body.data[500]).toEqual(stored(overlap[500], { duplicate: false }));
      expect(await count({ org_id: orgId })).toBe(1500);
    });

    it('rejects 1001 readings and an empty batch', async () => {
      const auth = await t.newKey({ organization: 'ingest-limits' });
      const tooMany = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: series(1001) }).expect(400);
      expect(tooMany.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/readings', message: 'must NOT have more than 1000 items' }] }));
      const empty = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: [] }).expect(400);
      expect(empty.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/readings', message: 'must NOT have fewer than 1 items' }] }));
      const orgId = (await t.db.knex('organizations').where({ name: 'ingest-limits' }).first()).id;
      expect(await count({ org_id: orgId })).toBe(0);
    });

    it('is all-or-nothing: invalid readings answer 400 naming each index, and nothing is stored', async () => {
      const auth = await t.newKey({ organization: 'ingest-invalid' });
      const batch: Record<string, unknown>[] = series(5);
      batch[3] = { ...batch[3], value: 'hot' };
      batch[4] = { ...batch[4], occurredAt: '2026-01-01 nope', colour: 'red' };
      delete batch[1].unit;
      const res = await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings: batch }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', {
        details: expect.arrayContaining([
          { path: '/readings/1/unit', message: 'is required' },
          { path: '/readings/3/value', message: 'must be number' },
          { path: '/readings/4/occurredAt', message: expect.stringContaining('RFC 3339') },
          { path: '/readings/4/colour', message: 'is not a known field' },
        ]),
      }));
      expect(res.body.details).toHaveLength(4);
      const orgId = (await t.db.knex('organizations').where({ name: 'ingest-invalid' }).first()).id;
      expect(await count({ org_id: orgId })).toBe(0);
    });

    it('rejects a malformed metric, an empty provider and a missing readings field', async () => {
      const metric = await t.http.post('/v1/sensor-readings').set('Authorization', t.auth).send({ readings: [reading({ metric: 'Temperature C' })] }).expect(400);
      expect(metric.body.details).toEqual([{ path: '/readings/0/metric', message: expect.stringContaining('pattern') }]);
      const provider = await t.http.post('/v1/sensor-readings').set('Authorization', t.auth).send({ readings: [reading({ provider: '' })] }).expect(400);
      expect(provider.body.details).toEqual([{ path: '/readings/0/provider', message: 'must NOT have fewer than 1 characters' }]);
      const missing = await t.http.post('/v1/sensor-readings').set('Authorization', t.auth).send([reading()]).expect(400);
      expect(missing.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '', message: 'must be object' }] }));
    });

    it('replays the first answer for a retried Idempotency-Key', async () => {
      const auth = await t.newKey({ organization: 'ingest-idempotent' });
      const batch = { readings: series(2) };
      const first = await t.http.post('/v1/sensor-readings').set('Authorization', auth).set('Idempotency-Key', 'batch-1').send(batch).expect(201);
      const replay = await t.http.post('/v1/sensor-readings').set('Authorization', auth).set('Idempotency-Key', 'batch-1').send(batch).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual(first.body);
    });

    it('needs sensors:write', async () => {
      const readOnly = await t.newKey({ scopes: ['sensors:read'] });
      const res = await t.http.post('/v1/sensor-readings').set('Authorization', readOnly).send({ readings: [reading()] }).expect(403);
      expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
    });
  });

  describe('getSensorReading', () => {
    it('answers 404 for an unknown id', async () => {
      const res = await t.http.get('/v1/sensor-readings/srd_000000000000000000000000').set('Authorization', t.auth).expect(404);
      expect(res.body).toEqual(anError('NOT_FOUND'));
    });
  });

  describe('listSensorReadings', () => {
    let auth: string;
    const t0 = Date.UTC(2026, 5, 1, 12);
    const at = (minutes: number) => new Date(t0 + minutes * 60_000).toISOString();
    // stored out of time order, and two readings at the same instant
    const readings = [
      reading({ occurredAt: at(2), siteId: 'site_a' }),
      reading({ occurredAt: at(0), siteId: 'site_a' }),
      reading({ occurredAt: at(1), siteId: 'site_b', metric: 'humidity_pct', unit: '%' }),
      reading({ occurredAt: at(1), siteId: 'site_a', provider: 'other-iot', sensorExternalId: 'x-1' }),
      reading({ occurredAt: at(3), siteId: 'site_b' }),
    ];
    let ids: string[];
    beforeAll(async () => {
      auth = await t.newKey({ organization: 'list-readings' });
      ids = (await t.http.post('/v1/sensor-readings').set('Authorization', auth).send({ readings }).expect(201)).body.data.map((r: { id: string }) => r.id);
    });
    const list = async (query: string) => (await t.http.get(`/v1/sensor-readings${query}`).set('Authorization', auth).expect(200)).body;
    const idsOf = (body: { data: { id: string }[] }) => body.data.map((r) => r.id);

    it('orders by occurredAt, ties in a stable order, with whole readings', async () => {
      const body = await list('');
      expect(body).toEqual({ data: [1, 2, 3, 0, 4].map((i) => stored(readings[i], { id: ids[i] })), nextCursor: null });
    });

    it('filters by site, provider, sensor and metric', async () => {
      expect(idsOf(await list('?siteId=site_a'))).toEqual([1, 3, 0].map((i) => ids[i]));
      expect(idsOf(await list('?provider=other-iot'))).toEqual([ids[3]]);
      expect(idsOf(await list('?provider=acme-iot&sensorExternalId=th-0042&metric=temperature_c'))).toEqual([1, 0, 4].map((i) => ids[i]));
      expect(idsOf(await list('?metric=humidity_pct'))).toEqual([ids[2]]);
      expect(idsOf(await list('?siteId=site_nowhere'))).toEqual([]);
    });

    it('treats occurredAfter and occurredBefore as exclusive bounds, in any offset', async () => {
      expect(idsOf(await list(`?occurredAfter=${at(1)}`))).toEqual([0, 4].map((i) => ids[i]));
      expect(idsOf(await list(`?occurredBefore=${at(1)}`))).toEqual([ids[1]]);
      expect(idsOf(await list(`?occurredAfter=${at(0)}&occurredBefore=${at(3)}`))).toEqual([2, 3, 0].map((i) => ids[i]));
      // 13:00+01:00 is 12:00Z = at(0)
      expect(idsOf(await list(`?siteId=site_a&occurredAfter=${encodeURIComponent('2026-06-01T13:00:00+01:00')}`))).toEqual([3, 0].map((i) => ids[i]));
    });

    it('lets a client poll with occurredAfter = the last reading it saw', async () => {
      const pollAuth = await t.newKey({ organization: 'poll-readings' });
      await t.http.post('/v1/sensor-readings').set('Authorization', pollAuth).send({ readings: series(3, { start: t0, siteId: 'site_poll' }) }).expect(201);
      const first = await t.http.get('/v1/sensor-readings?siteId=site_poll').set('Authorization', pollAuth).expect(200);
      expect(first.body.data).toHaveLength(3);
      const last = first.body.data[2].occurredAt;

      const nothingNew = await t.http.get(`/v1/sensor-readings?siteId=site_poll&occurredAfter=${last}`).set('Authorization', pollAuth).expect(200);
      expect(nothingNew.body).toEqual({ data: [], nextCursor: null });

      const next = series(2, { start: t0 + 3 * 60_000, siteId: 'site_poll' });
      await t.http.post('/v1/sensor-readings').set('Authorization', pollAuth).send({ readings: next }).expect(201);
      const polled = await t.http.get(`/v1/sensor-readings?siteId=site_poll&occurredAfter=${last}`).set('Authorization', pollAuth).expect(200);
      expect(polled.body).toEqual({ data: next.map((r) => stored(r)), nextCursor: null });
    });

    it('pages through every reading exactly once while readings are added', async () => {
      const pageAuth = await t.newKey({ organization: 'page-readings' });
      // several readings share an instant, so the page boundary falls inside a tie
      const batch = Array.from({ length: 7 }, (_, i) => reading({ sensorExternalId: `s-${i}`, occurredAt: at(Math.floor(i / 3)) }));
      const ids7 = (await t.http.post('/v1/sensor-readings').set('Authorization', pageAuth).send({ readings: batch }).expect(201)).body.data.map((r: { id: string }) => r.id);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      let added: string | undefined;
      do {
        const url: string = `/v1/sensor-readings?limit=3${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await t.http.get(url).set('Authorization', pageAuth).expect(200);
        seen.push(...idsOf(res.body));
        cursor = res.body.nextCursor;
        if (pages++ === 0) {
          added = (await t.http.post('/v1/sensor-readings').set('Authorization', pageAuth).send({ readings: [reading({ occurredAt: at(10) })] }).expect(201)).body.data[0].id;
        }
      } while (cursor);
      expect(seen).toEqual([...ids7, added]);
    });

    it('rejects a limit out of range, a malformed cursor or time, and a window that is always empty', async () => {
      const limit = await t.http.get('/v1/sensor-readings?limit=501').set('Authorization', auth).expect(400);
      expect(limit.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/limit', message: 'must be <= 500' }] }));
      const zero = await t.http.get('/v1/sensor-readings?limit=0').set('Authorization', auth).expect(400);
      expect(zero.body.details).toEqual([{ path: '/query/limit', message: 'must be >= 1' }]);
      const cursor = await t.http.get('/v1/sensor-readings?cursor=WyJ4Il0').set('Authorization', auth).expect(400);
      expect(cursor.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: expect.any(String) }] }));
      const time = await t.http.get('/v1/sensor-readings?occurredAfter=yesterday').set('Authorization', auth).expect(400);
      expect(time.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/occurredAfter', message: expect.stringContaining('RFC 3339') }] }));
      const window = await t.http.get(`/v1/sensor-readings?occurredAfter=${at(5)}&occurredBefore=${at(5)}`).set('Authorization', auth).expect(400);
      expect(window.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/occurredBefore', message: 'must be later than occurredAfter' }] }));
    });
  });

  describe('tenancy', () => {
    it("never shows another organization's readings", async () => {
      const mineAuth = await t.newKey({ organization: 'tenancy-readings-a' });
      const other = await t.newKey({ organization: 'tenancy-readings-b' });
      const mine = (await t.http.post('/v1/sensor-readings').set('Authorization', mineAuth).send({ readings: [reading({ siteId: 'site_shared' })] }).expect(201)).body.data[0];
      const missing = await t.http.get(`/v1/sensor-readings/${mine.id}`).set('Authorization', other).expect(404);
      expect(missing.body).toEqual(anError('NOT_FOUND'));
      expect((await t.http.get('/v1/sensor-readings?siteId=site_shared').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get('/v1/sensor-readings').set('Authorization', other).expect(200)).body).toEqual({ data: [], nextCursor: null });
      const { duplicate: _, ...asStored } = mine;
      expect((await t.http.get(`/v1/sensor-readings/${mine.id}`).set('Authorization', mineAuth).expect(200)).body).toEqual(asStored);
    });
  });
});

describeEachDatabase('sensor readings: leap seconds', (t) => {
  it('accepts an RFC 3339 leap second as the last millisecond of its minute', async () => {
    const reading = { provider: 'acme', sensorExternalId: 'leap-1', siteId: 'site_leap', metric: 'temperature_c', value: 1, unit: 'C', occurredAt: '2016-12-31T23:59:60Z' };
    const res = await t.http.post('/v1/sensor-readings').set('Authorization', t.auth).send({ readings: [reading] }).expect(201);
    expect(res.body.data[0].occurredAt).toBe('2016-12-31T23:59:59.999Z');
    const list = await t.http.get('/v1/sensor-readings?siteId=site_leap&occurredAfter=2016-12-31T23:59:60%2B00:00').set('Authorization', t.auth).expect(200);
    expect(list.body).toEqual({ data: [], nextCursor: null });
  });
});
