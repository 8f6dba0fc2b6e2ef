import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describeEachDatabase, anError } from './support/testApp';
import { bindCursor } from '../runtime/http/cursorBinding';
import type { OperationId } from '../generated/operations';

const reading = (over: Record<string, unknown> = {}) => ({
  provider: 'acme', sensorExternalId: 's-1', siteId: 'site_hostile', metric: 'temperature_c', value: 1, unit: 'C', occurredAt: '2026-11-22T09:00:00Z', ...over,
});
/** A cursor holding `values`, bound to `operationId`, its path and its filters as the API binds the cursors it answers (http/cursorBinding.ts). */
const cursorOf = (values: unknown, operationId: OperationId, filters: Record<string, string> = {}, path: Record<string, string> = {}) =>
  bindCursor(operationId, path, filters, Buffer.from(JSON.stringify(values)).toString('base64url'));

// Inputs that pass a naive reading of the contract but that no column can hold, or that the
// libraries underneath mishandle: each must be a clear 400, never a 500 (found in review).
describeEachDatabase('hostile input', (t) => {
  it('a limit that is not a finite number', async () => {
    for (const limit of ['1e400', 'Infinity', '1e2.5', '0x10', '%205', '%2B5', '1e1', '5%20']) {
      const res = await t.http.get(`/v1/sensor-readings?limit=${limit}`).set('Authorization', t.auth).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [expect.objectContaining({ path: '/query/limit' })] }));
    }
  });

  it('a name, title, label or address of white space or invisible characters only is refused, naming the field', async () => {
    const site = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Not blank' }).expect(201)).body;
    const checkin = (await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: 'auth0|blank', siteId: site.id }).expect(201)).body;
    const blank = 'must not be blank: it has no character but white space or invisible ones';
    const cases: [string, string, Record<string, unknown>, string][] = [
      ['post', '/v1/sites', { name: ' ' }, '/name'],
      ['patch', `/v1/sites/${site.id}`, { name: '\n\t' }, '/name'],
      ['post', '/v1/assets', { name: '\u3000', siteId: site.id }, '/name'],
      ['post', '/v1/templates', { name: '  ', items: [{ id: 'a', label: 'Fine', type: 'yes_no' }] }, '/name'],
      ['post', '/v1/templates', { name: 'Fine', items: [{ id: 'a', label: '\u00a0', type: 'yes_no' }] }, '/items/0/label'],
      ['post', '/v1/issues', { title: '\r\n' }, '/title'],
      ['patch', `/v1/checkins/${checkin.id}`, { checkInAddress: ' ' }, '/checkInAddress'],
      // invisible characters that JavaScript's \s does not count as space
      ['post', '/v1/sites', { name: '\u200b' }, '/name'],
      ['patch', `/v1/sites/${site.id}`, { name: '\u200b\u200c\u200d' }, '/name'],
      ['post', '/v1/issues', { title: '\u2060 \u00ad' }, '/title'],
      ['post', '/v1/assets', { name: '\u3164\u180e', siteId: site.id }, '/name'],
      ['post', '/v1/templates', { name: '\u200e\u202e', items: [{ id: 'a', label: 'Fine', type: 'yes_no' }] }, '/name'],
      ['post', '/v1/sites', { name: '\u2066\u2069\u061c' }, '/name'],
      ['post', '/v1/sites', { name: '\u2800\ufe0f\u034f\uffa0\u115f' }, '/name'],
    ];
    for (const [method, path, body, pointer] of cases) {
      const res = await (t.http as any)[method](path).set('Authorization', t.auth).send(body);
      expect([path, res.status, res.body]).toEqual([path, 400, anError('VALIDATION_ERROR', { details: [{ path: pointer, message: blank }] })]);
    }
    expect((await t.http.get(`/v1/sites/${site.id}`).set('Authorization', t.auth).expect(200)).body.name).toBe('Not blank');
    // one visible character among them is a name, stored as sent
    const named = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: '\u200bA\u200b' }).expect(201);
    expect(named.body.name).toBe('\u200bA\u200b');
  });

  it('a limit in decimal digits is taken, in the list operations', async () => {
    for (const path of ['/v1/sites', '/v1/checkins', '/v1/sensor-readings', '/v1/events']) {
      expect((await t.http.get(`${path}?limit=05`).set('Authorization', t.auth).expect(200)).body).toMatchObject({ data: expect.any(Array) });
      await t.http.get(`${path}?limit=0x10`).set('Authorization', t.auth).expect(400);
    }
  });

  it('a body number that overflows to Infinity', async () => {
    const res = await t.http.post('/v1/sensor-readings').set('Authorization', t.auth).set('Content-Type', 'application/json')
      .send(`{"readings":[${JSON.stringify(reading()).replace('"value":1', '"value":1e400')}]}`).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/readings/0/value', message: 'must be number' }] })); // Ajv's number type excludes Infinity
    expect(await t.db.knex('sensor_readings').where({ site_id: 'site_hostile' })).toHaveLength(0);
  });

  it.each([
    ['an hour-only offset', '2026-01-01T00:00:00+01'],
    ['an offset without colon', '2026-01-01T00:00:00+0100'],
    ['no offset', '2026-01-01T00:00:00'],
    ['a day that does not exist', '2026-02-30T00:00:00Z'],
    ['a year before 0000 in UTC', '0000-01-01T00:00:00+01:00'],
    ['a year after 9999 in UTC', '9999-12-31T23:59:59-01:00'],
  ])('a date-time with %s', async (_name, value) => {
    const query = await t.http.get(`/v1/sensor-readings?occurredAfter=${encodeURIComponent(value)}`).set('Authorization', t.auth).expect(400);
    expect(query.body.details).toEqual([expect.objectContaining({ path: '/query/occurredAfter' })]);
    const body = await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: 'u', siteId: 's', arrivalWindowStartAt: value }).expect(400);
    expect(body.body.details).toEqual([expect.objectContaining({ path: '/arrivalWindowStartAt' })]);
  });

  it('accepts leap seconds with any offset, and the extreme years that stay four-digit in UTC', async () => {
    await t.http.get(`/v1/sensor-readings?occurredAfter=${encodeURIComponent('2017-01-01T00:59:60+01:00')}`).set('Authorization', t.auth).expect(200);
    const res = await t.http.post('/v1/checkins').set('Authorization', t.auth)
      .send({ userId: 'u', siteId: 's', arrivalWindowStartAt: '0000-01-01T00:00:00Z', arrivalWindowEndAt: '9999-12-31T23:59:59-00:00' }).expect(201);
    expect(res.body).toMatchObject({ arrivalWindowStartAt: '0000-01-01T00:00:00.000Z', arrivalWindowEndAt: '9999-12-31T23:59:59.000Z' });
    await t.http.get(`/v1/calendar/occurrences?from=${encodeURIComponent('2016-12-31T23:59:60Z')}&to=2017-01-03T00:00:00Z`).set('Authorization', t.auth).expect(200);
  });

  it.each([
    ['a text where the sequence goes', ['x']],
    ['a fraction', [1.5]],
    ['a number beyond 2^53', [99999999999999999999]],
    ['a negative sequence', [-1]],
    ['the wrong length', [1, 2]],
  ])('a tampered cursor: %s', async (_name, values) => {
    const res = await t.http.get(`/v1/users?cursor=${cursorOf(values, 'listUsers')}`).set('Authorization', t.auth).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }] }));
  });

  it('a tampered two-part cursor (sensor readings) and an integration catalogue cursor', async () => {
    await t.http.get(`/v1/sensor-readings?cursor=${cursorOf(['2026', 'y'], 'listSensorReadings')}`).set('Authorization', t.auth).expect(400);
    await t.http.get(`/v1/sensor-readings?cursor=${cursorOf([1, 2], 'listSensorReadings')}`).set('Authorization', t.auth).expect(400);
    await t.http.get(`/v1/integrations/workflow-automation/actions?cursor=${cursorOf([7], 'listIntegrationActions', {}, { partner: 'workflow-automation' })}`).set('Authorization', t.auth).expect(400);
  });

  it('U+0000 and unpaired surrogates inside a cursor (Postgres refuses them in a query: a 500 before)', async () => {
    for (const values of [['a\u0000', 1], ['\u0000', 55], ['\ud800', 3]]) {
      const res = await t.http.get(`/v1/sensor-readings?cursor=${cursorOf(values, 'listSensorReadings')}`).set('Authorization', t.auth).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }] }));
    }
  });

  it('a body that is not UTF-8 (Latin-1 text, a surrogate encoded as bytes) is refused, never stored with U+FFFD', async () => {
    for (const bytes of [Buffer.from('{"name":"caf\xe9"}', 'latin1'), Buffer.from([...Buffer.from('{"name":"'), 0xed, 0xa0, 0x80, ...Buffer.from('"}')])]) {
      // the bytes as they are (supertest would turn a Buffer into JSON of its own)
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json').serialize((b: Buffer) => b as unknown as string).send(bytes as any).expect(400);
      expect(res.body).toEqual(anError('INVALID_JSON', { error: 'Request body is not valid UTF-8 (send JSON text encoded as UTF-8)' }));
    }
    expect((await t.http.get('/v1/sites').set('Authorization', t.auth).expect(200)).body.data.filter((s: { name: string }) => s.name.includes('\uFFFD'))).toEqual([]);
    const ok = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json').serialize((b: Buffer) => b as unknown as string).send(Buffer.from('{"name":"café ☕"}', 'utf8') as any).expect(201);
    expect(ok.body.name).toBe('café ☕');
  });

  it('U+0000 and unpaired surrogates in body and query strings', async () => {
    const nul = await t.http.post('/v1/users').set('Authorization', t.auth).send({ userId: 'a\u0000b' }).expect(400);
    expect(nul.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/userId', message: 'must not contain U+0000 or unpaired surrogates' }] }));
    const surrogate = await t.http.post('/v1/logs').set('Authorization', t.auth).set('Content-Type', 'application/json')
      .send('{"entityType":"checkin","entityId":"chk_1","message":"half \\ud800 a pair"}').expect(400);
    expect(surrogate.body.details).toEqual([{ path: '/message', message: 'must not contain U+0000 or unpaired surrogates' }]);
    const query = await t.http.get('/v1/users?userId=a%00b').set('Authorization', t.auth).expect(400);
    expect(query.body.details).toEqual([{ path: '/query/userId', message: 'must not contain U+0000 or unpaired surrogates' }]);
    expect(await t.db.knex('users').count({ n: '*' }).first()).toEqual({ n: expect.anything() });
  });

  it('a query percent-escape that is not UTF-8 (the parser would read U+FFFD)', async () => {
    for (const query of ['siteId=%FF', 'siteId=%ED%A0%80', 'siteId=caf%E9', 'siteId=100%', 'siteId=%ZZ']) {
      const res = await t.http.get(`/v1/checkins?${query}`).set('Authorization', t.auth).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query', message: 'has a malformed percent-escape, or one that is not UTF-8' }] }));
    }
    await t.http.get('/v1/checkins?siteId=caf%C3%A9&limit=5').set('Authorization', t.auth).expect(200);
  });

  it('two Authorization headers: refused, whichever of them is valid', async () => {
    for (const pair of [[t.auth, 'Bearer fop_not_a_key'], ['Bearer fop_not_a_key', t.auth], [t.auth, t.auth]]) {
      const res = await t.http.get('/v1/sites').set('Authorization', pair as unknown as string).expect(401);
      expect(res.body).toEqual(anError('UNAUTHENTICATED', { error: 'Send the Authorization header once' }));
    }
  });

  it('a body whose declared charset is not UTF-8: 415, whatever the bytes', async () => {
    for (const charset of ['utf-16', 'latin1', 'ISO-8859-1', '"utf-32"', 'utf8']) {
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', `application/json; charset=${charset}`).send('{"name":"x"}').expect(415);
      expect(res.body).toEqual(anError('UNSUPPORTED_MEDIA_TYPE'));
    }
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json; charset=UTF-8').send('{"name":"Charset ok"}').expect(201);
  });

  it('a transfer coding other than chunked (gzip, chunked): 415, never parsed as if plain', async () => {
    const server = http.createServer(t.app.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const post = (transferEncoding: string, body: Buffer) => new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1', port: (server.address() as AddressInfo).port, method: 'POST', path: '/v1/sites',
          headers: { authorization: t.auth, 'content-type': 'application/json', 'transfer-encoding': transferEncoding },
        }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c) => (text += c)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(body); // node's client sends it chunked: the header names chunked last
      });
      for (const coding of ['gzip, chunked', 'deflate, chunked']) {
        const refused = await post(coding, Buffer.from('{"name":"Not coded at all"}'));
        expect(refused).toEqual({ status: 415, body: anError('UNSUPPORTED_MEDIA_TYPE', { error: `Transfer-Encoding ${coding} is not supported: send chunked or with Content-Length, and compress with Content-Encoding` }) });
      }
      expect(await post('chunked', Buffer.from('{"name":"Chunked"}'))).toMatchObject({ status: 201, body: { name: 'Chunked' } });
      expect(await post('Chunked', Buffer.from('{"name":"Chunked again"}'))).toMatchObject({ status: 201, body: { name: 'Chunked again' } });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a body that does not decompress as its Content-Encoding says, or an encoding not supported', async () => {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json').set('Content-Encoding', encoding).send('{"name":"plain"}').expect(400);
      expect(res.body).toEqual(anError('INVALID_JSON', { error: `Request body is not ${encoding} data, as its Content-Encoding says` }));
    }
    const compress = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json').set('Content-Encoding', 'compress').send('{"name":"plain"}').expect(415);
    expect(compress.body).toEqual(anError('UNSUPPORTED_MEDIA_TYPE', { error: 'Content-Encoding compress is not supported: send gzip, deflate, br or none' }));
    const zipped = (await import('node:zlib')).gzipSync('{"name":"Zipped"}');
    const ok = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json').set('Content-Encoding', 'gzip')
      .serialize((b: Buffer) => b as unknown as string).send(zipped as any).expect(201);
    expect(ok.body.name).toBe('Zipped');
  });

  it('a malformed percent-encoding in the path', async () => {
    const res = await t.http.get('/v1/users/%ZZ').set('Authorization', t.auth).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { error: 'The URL has a malformed percent-encoding' }));
  });

  it('a deeply nested body sent with an Idempotency-Key', async () => {
    const deep = '['.repeat(10000) + ']'.repeat(10000);
    const res = await t.http.post('/v1/users').set('Authorization', t.auth).set('Idempotency-Key', 'deep-1').set('Content-Type', 'application/json').send(deep).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { error: 'Request body nests deeper than 64 levels' }));
    expect(await t.db.knex('idempotency_keys').where({ idempotency_key: 'deep-1' })).toHaveLength(0);
  });

  it('the bearer scheme name in any case', async () => {
    await t.http.get('/v1/sites').set('Authorization', t.auth.replace('Bearer', 'bearer')).expect(200);
    await t.http.get('/v1/sites').set('Authorization', t.auth.replace('Bearer', 'BEARER')).expect(200);
  });

  it('HEAD on a GET route answers like GET, without a body', async () => {
    const { default: supertest } = await import('supertest');
    const res = await supertest(t.app.app).head('/v1/sites').set('Authorization', t.auth).expect(200);
    expect(res.text ?? '').toBe('');
    expect(res.headers['content-type']).toMatch(/application\/json/);
  });
});

describeEachDatabase('hostile input: calendar cursor', (t) => {
  it('a cursor given to another list, or to the same list with other filters, is refused; another limit is fine', async () => {
    for (let i = 0; i < 3; i++) {
      await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: `Paged ${i}` }).expect(201);
      await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: `auth0|paged-${i}`, siteId: 'site_paged' }).expect(201);
    }
    const refusal = anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'was issued for another list or other filters: pass it back to the same operation, on the same path, with the same filters' }] });
    const sites = (await t.http.get('/v1/sites?limit=1').set('Authorization', t.auth).expect(200)).body;
    expect((await t.http.get(`/v1/checkins?limit=1&cursor=${sites.nextCursor}`).set('Authorization', t.auth).expect(400)).body).toEqual(refusal);
    expect((await t.http.get(`/v1/sites?limit=2&cursor=${sites.nextCursor}`).set('Authorization', t.auth).expect(200)).body.data).toHaveLength(2);
    // without its digest a cursor is no cursor this API answered (cut short, or made by hand): refused
    // everywhere, its own list included, never taken as a position in whatever list it is given to
    const unissued = anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }] });
    const cutShort = sites.nextCursor.slice(0, sites.nextCursor.lastIndexOf('.'));
    for (const url of [`/v1/checkins?limit=1&cursor=${cutShort}`, `/v1/sites?limit=1&cursor=${cutShort}`, '/v1/assets?cursor=WzVd']) {
      expect((await t.http.get(url).set('Authorization', t.auth).expect(400)).body).toEqual(unissued);
    }

    // a list without path parameters binds its cursors as before path parameters were bound too, so
    // cursors a client holds across an upgrade stay valid (digests computed by that earlier version)
    expect(bindCursor('listSites', {}, {}, 'WzVd')).toBe('WzVd.6rtKGgnF0PI');
    expect(bindCursor('listCheckins', {}, { status: 'active' }, 'WzVd')).toBe('WzVd.zs4_bdzkebA');
    // …and to the same list of another parent: here another partner's triggers
    const triggers = (await t.http.get('/v1/integrations/webhooks/triggers?limit=1').set('Authorization', t.auth).expect(200)).body;
    expect((await t.http.get(`/v1/integrations/workflow-automation/triggers?limit=1&cursor=${triggers.nextCursor}`).set('Authorization', t.auth).expect(400)).body).toEqual(refusal);
    const following = (await t.http.get(`/v1/integrations/webhooks/triggers?limit=1&cursor=${triggers.nextCursor}`).set('Authorization', t.auth).expect(200)).body;
    // a cursor an earlier version issued (bound without its path) still walks on after an upgrade
    const position = triggers.nextCursor.slice(0, triggers.nextCursor.lastIndexOf('.'));
    const earlier = (await t.http.get(`/v1/integrations/webhooks/triggers?limit=1&cursor=${bindCursor('listIntegrationTriggers', {}, {}, position)}`).set('Authorization', t.auth).expect(200)).body;
    expect(earlier).toEqual(following);

    const filtered = (await t.http.get('/v1/checkins?limit=1&status=pre_checkin').set('Authorization', t.auth).expect(200)).body;
    expect((await t.http.get(`/v1/checkins?limit=1&status=active&cursor=${filtered.nextCursor}`).set('Authorization', t.auth).expect(400)).body).toEqual(refusal);
    expect((await t.http.get(`/v1/checkins?limit=1&cursor=${filtered.nextCursor}`).set('Authorization', t.auth).expect(400)).body).toEqual(refusal);
    await t.http.get(`/v1/checkins?status=pre_checkin&limit=5&cursor=${filtered.nextCursor}`).set('Authorization', t.auth).expect(200);

    // the calendar's window is one of its filters
    const template = (await t.http.post('/v1/templates').set('Authorization', t.auth).send({ name: 'Paged', items: [{ id: 'a', label: 'a', type: 'text' }] }).expect(201)).body;
    const site = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Calendar paged' }).expect(201)).body;
    await t.http.post('/v1/schedules').set('Authorization', t.auth).send({ templateId: template.id, siteId: site.id, timezone: 'UTC', startsAt: '2026-11-02T09:00:00', durationMinutes: 30, recurrence: 'FREQ=DAILY' }).expect(201);
    const november = (await t.http.get('/v1/calendar/occurrences?from=2026-11-02T00:00:00Z&to=2026-11-30T00:00:00Z&limit=2').set('Authorization', t.auth).expect(200)).body;
    expect((await t.http.get(`/v1/calendar/occurrences?from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00Z&cursor=${november.nextCursor}`).set('Authorization', t.auth).expect(400)).body).toEqual(refusal);
    const next = (await t.http.get(`/v1/calendar/occurrences?from=2026-11-02T00:00:00Z&to=2026-11-30T00:00:00Z&limit=2&cursor=${november.nextCursor}`).set('Authorization', t.auth).expect(200)).body;
    expect(next.data.map((o: { startAt: string }) => o.startAt)).toEqual(['2026-11-04T09:00:00.000Z', '2026-11-05T09:00:00.000Z']);
  });

  it('a tampered occurrence cursor', async () => {
    const window = 'from=2026-11-01T00:00:00Z&to=2026-11-30T00:00:00Z';
    for (const values of [['not a time', 'sch_x'], [1, 'sch_x'], ['2026-11-01T00:00:00.000Z']]) {
      const res = await t.http.get(`/v1/calendar/occurrences?${window}&cursor=${cursorOf(values, 'listCalendarOccurrences', { from: '2026-11-01T00:00:00Z', to: '2026-11-30T00:00:00Z' })}`).set('Authorization', t.auth).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }] }));
    }
  });
});
