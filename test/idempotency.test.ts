import { describeEachDatabase, anId, anError, TestContext } from './support/testApp';
import { authenticate } from '../runtime/auth/apiKeys';
import { createApp } from '../runtime/http/app';
import { claimIdempotencyKey, releaseIdempotencyKey, Claimed } from '../runtime/idempotency/claim';
import { fingerprint } from '../runtime/idempotency/request';
import { purgeExpiredIdempotencyKeys } from '../runtime/idempotency/purge';
import { terminateClaimOwners } from './support/claimLocks';

// Idempotency-Key behaviour through the real app (docs/architecture.md, "Idempotency"). Concurrency,
// crashes and several processes are in idempotency.concurrency.test.ts; the replay of every
// write operation in idempotency.replay.test.ts.

const depot = { name: 'Depot', address: '2 Yard Lane' };
const past = () => new Date(Date.now() - 60_000).toISOString();

async function keyIdOf(t: TestContext, auth: string): Promise<string> {
  return (await authenticate(t.db.knex, auth)).keyId;
}

async function siteCount(t: TestContext): Promise<number> {
  const [{ n }] = await t.db.knex('sites').count({ n: '*' });
  return Number(n);
}

async function keyRow(t: TestContext, key: string) {
  return t.db.knex('idempotency_keys').where({ idempotency_key: key }).first();
}

describe('fingerprint', () => {
  it('ignores key order and whitespace, and keeps types apart', () => {
    const a = fingerprint('post', '/v1/sites', JSON.parse('{"name":"A","n":{"x":1,"y":[1,"1"]}}'));
    expect(fingerprint('POST', '/v1/sites', JSON.parse(' { "n" : { "y" : [ 1 , "1" ] , "x" : 1 } , "name" : "A" } '))).toBe(a);
    expect(fingerprint('post', '/v1/sites', { name: 'A', n: { x: '1', y: [1, '1'] } })).not.toBe(a);
    expect(fingerprint('post', '/v1/sites', { name: 'A', n: { x: 1, y: ['1', 1] } })).not.toBe(a);
  });

  it('includes the method and the path', () => {
    const body = { name: 'A' };
    expect(fingerprint('post', '/v1/sites', body)).not.toBe(fingerprint('patch', '/v1/sites', body));
    expect(fingerprint('post', '/v1/sites', body)).not.toBe(fingerprint('post', '/v1/sites/x', body));
    expect(fingerprint('post', '/v1/sites', body, { a: '1' })).not.toBe(fingerprint('post', '/v1/sites', body));
    expect(fingerprint('delete', '/v1/sites/x', undefined)).toBe(fingerprint('delete', '/v1/sites/x', null));
  });
});

describeEachDatabase('idempotency', (t) => {
  describe('replay', () => {
    it('answers the original status, body and Location with Idempotent-Replayed: true, and stores nothing new', async () => {
      const first = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'replay-1').send(depot).expect(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const count = await siteCount(t);

      const again = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'replay-1').send(depot).expect(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers.location).toBe(first.headers.location);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.headers['x-request-id']).not.toBe(first.headers['x-request-id']);
      expect(await siteCount(t)).toBe(count);
    });

    it('takes the body as parsed JSON: key order and whitespace do not matter', async () => {
      const first = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'order-1')
        .set('Content-Type', 'application/json').send('{"name":"Order","address":"x"}').expect(201);
      const again = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'order-1')
        .set('Content-Type', 'application/json').send('  {\n "address" : "x",  "name":"Order" }\n').expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.id).toBe(first.body.id);
    });

    it('fingerprints the body as received, before defaults are filled in', async () => {
      const first = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'defaults-1').send({ name: 'D' }).expect(201);
      expect(first.body.geofenceRadiusMeters).toBe(100);
      // the same resulting site, but not the same request: a client that now spells out the
      // default is sending something else under the key
      const spelled = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'defaults-1')
        .send({ name: 'D', geofenceRadiusMeters: 100 }).expect(409);
      expect(spelled.body).toEqual(anError('IDEMPOTENCY_KEY_REUSED'));
    });

    it('stores and replays any characters of key and body exactly', async () => {
      const key = `it's; -- $$ \\' ? /* x`; // a header carries only visible ASCII
      const hostile = { name: `O'Brien's \\ "depot"; drop table sites; -- $$ $tag$ ? \u00e9 \u{1F6A7}`, address: "\\'\n\t'" };
      const first = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', key).send(hostile).expect(201);
      expect(first.body).toMatchObject(hostile);
      const row = await keyRow(t, key);
      expect({ state: row.state, body: JSON.parse(row.response_body) }).toEqual({ state: 'completed', body: first.body });

      const again = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', key).send(hostile).expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(await t.db.knex('sites').where({ name: hostile.name }).count({ n: '*' })).toEqual([{ n: 1 }]);
    });

    it('replays a delete (204, no body) with the header; the operation does not run again', async () => {
      const site = (await t.http.post('/v1/sites').set('Authorization', t.auth).send(depot).expect(201)).body;
      await t.http.delete(`/v1/sites/${site.id}`).set('Authorization', t.auth).set('Idempotency-Key', 'delete-1').expect(204);
      const again = await t.http.delete(`/v1/sites/${site.id}`).set('Authorization', t.auth).set('Idempotency-Key', 'delete-1').expect(204);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.text).toBe('');
      await t.http.delete(`/v1/sites/${site.id}`).set('Authorization', t.auth).expect(404);
    });

    it("stores the operation's own 4xx and replays it", async () => {
      const url = '/v1/sites/site_000000000000000000000000';
      const first = await t.http.patch(url).set('Authorization', t.auth).set('Idempotency-Key', 'own-404').send({ name: 'N' }).expect(404);
      expect(first.body).toEqual(anError('NOT_FOUND'));
      expect(await keyRow(t, 'own-404')).toMatchObject({ state: 'completed', response_status: 404, lock_token: null });

      const again = await t.http.patch(url).set('Authorization', t.auth).set('Idempotency-Key', 'own-404').send({ name: 'N' }).expect(404);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body); // verbatim, the original requestId included
    });

    it('stores a 409 INVALID_TRANSITION and replays it', async () => {
      const checkin = (await t.http.post('/v1/checkins').set('Authorization', t.auth).send({ userId: 'idem|walker', siteId: 'site_anywhere', status: 'active' }).expect(201)).body;
      await t.http.patch(`/v1/checkins/${checkin.id}`).set('Authorization', t.auth).send({ status: 'checked_out' }).expect(200);
      const back = () => t.http.patch(`/v1/checkins/${checkin.id}`).set('Authorization', t.auth).set('Idempotency-Key', 'transition-1').send({ status: 'active' });
      const first = await back().expect(409);
      expect(first.body).toEqual(anError('INVALID_TRANSITION'));
      const again = await back().expect(409);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
    });
  });

  describe('IDEMPOTENCY_KEY_REUSED', () => {
    it('answers another body, path or method under a used key with 409, stores nothing, and the original still replays', async () => {
      const auth = t.auth;
      const first = await t.http.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', 'reused-1').send(depot).expect(201);
      const count = await siteCount(t);

      const otherBody = await t.http.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', 'reused-1').send({ ...depot, name: 'Other' }).expect(409);
      expect(otherBody.body).toEqual(anError('IDEMPOTENCY_KEY_REUSED'));
      expect(otherBody.headers['retry-after']).toBeUndefined();
      expect(otherBody.headers['idempotent-replayed']).toBeUndefined();
      const otherPath = await t.http.patch(`/v1/sites/${first.body.id}`).set('Authorization', auth).set('Idempotency-Key', 'reused-1').send(depot).expect(409);
      expect(otherPath.body).toEqual(anError('IDEMPOTENCY_KEY_REUSED'));
      const otherMethod = await t.http.delete(`/v1/sites/${first.body.id}`).set('Authorization', auth).set('Idempotency-Key', 'reused-1').expect(409);
      expect(otherMethod.body).toEqual(anError('IDEMPOTENCY_KEY_REUSED'));

      expect(await siteCount(t)).toBe(count);
      await t.http.get(`/v1/sites/${first.body.id}`).set('Authorization', auth).expect(200);
      const again = await t.http.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', 'reused-1').send(depot).expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
    });
  });

  describe('what is not stored', () => {
    it('a contract validation failure: the corrected request may reuse the key', async () => {
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'invalid-1').send({ name: 'V', geofenceRadiusMeters: 5 }).expect(400);
      expect(await keyRow(t, 'invalid-1')).toBeUndefined();
      const ok = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'invalid-1').send({ name: 'V' }).expect(201);
      expect(ok.headers['idempotent-replayed']).toBeUndefined();
    });

    it("a handler's own validation failure (an unknown time zone) is not stored either", async () => {
      const bad = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'invalid-2').send({ name: 'T', timezone: 'Mars/Olympus' }).expect(400);
      expect(bad.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/timezone', message: expect.any(String) }] }));
      expect(await keyRow(t, 'invalid-2')).toBeUndefined();
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'invalid-2').send({ name: 'T', timezone: 'Europe/Paris' }).expect(201);
    });

    it('401, 403, 413, 415 and INVALID_JSON', async () => {
      const key = 'refused-1';
      await t.http.post('/v1/sites').set('Idempotency-Key', key).send(depot).expect(401);
      const readOnly = await t.newKey({ scopes: ['sites:read'] });
      await t.http.post('/v1/sites').set('Authorization', readOnly).set('Idempotency-Key', key).send(depot).expect(403);
      const tooLarge = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', key).send({ name: 'x'.repeat(5000) }).expect(413);
      expect(tooLarge.body).toEqual(anError('PAYLOAD_TOO_LARGE'));
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', key).set('Content-Type', 'text/plain').send('Depot').expect(415);
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', key).set('Content-Type', 'application/json').send('{"name":').expect(400);
      expect(await keyRow(t, key)).toBeUndefined();
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', key).send(depot).expect(201);
    });
  });

  describe('Idempotency-Key header', () => {
    it('rejects an empty key, a key over 128 characters and a key sent twice with 400 IDEMPOTENCY_KEY_INVALID', async () => {
      const count = await siteCount(t);
      for (const value of ['', 'k'.repeat(129), ['one', 'two']]) {
        const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', value as string).send(depot).expect(400);
        expect(res.body).toEqual(anError('IDEMPOTENCY_KEY_INVALID'));
      }
      expect(await siteCount(t)).toBe(count);
      const longest = 'k'.repeat(128);
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', longest).send(depot).expect(201);
      expect(await keyRow(t, longest)).toMatchObject({ state: 'completed', response_status: 201 });
    });

    it('is ignored on GET', async () => {
      await t.http.get('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', '').expect(200);
      await t.http.get('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', ['a', 'b'] as unknown as string).expect(200);
      await t.http.get('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'get-1').expect(200);
      expect(await keyRow(t, 'get-1')).toBeUndefined();
    });

    it('is scoped to the API key: two keys may use the same value and never see each other’s responses', async () => {
      const sameOrg = await t.newKey();
      const otherOrg = await t.newKey({ organization: 'idem-other' });
      const mine = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'shared-1').send(depot).expect(201);
      const theirs = await t.http.post('/v1/sites').set('Authorization', sameOrg).set('Idempotency-Key', 'shared-1').send(depot).expect(201);
      const other = await t.http.post('/v1/sites').set('Authorization', otherOrg).set('Idempotency-Key', 'shared-1').send({ name: 'Elsewhere' }).expect(201);
      for (const res of [theirs, other]) expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(new Set([mine.body.id, theirs.body.id, other.body.id]).size).toBe(3);
      expect((await t.http.post('/v1/sites').set('Authorization', otherOrg).set('Idempotency-Key', 'shared-1').send({ name: 'Elsewhere' }).expect(201)).body).toEqual(other.body);
    });
  });

  describe('a claim in progress', () => {
    it('answers 409 IDEMPOTENCY_IN_PROGRESS without Retry-After and stores nothing; after the release the request runs', async () => {
      const keyId = await keyIdOf(t, t.auth);
      const claim = await claimIdempotencyKey(t.db.knex, { ttlSeconds: 3600, leaseSeconds: 60 }, keyId, 'running-1', fingerprint('post', '/v1/sites', depot));
      expect(claim.kind).toBe('claimed');
      const count = await siteCount(t);

      const busy = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'running-1').send(depot).expect(409);
      expect(busy.body).toEqual(anError('IDEMPOTENCY_IN_PROGRESS'));
      // what the README tells a client to do: wait, and send once more if the answer was lost
      expect(busy.body.error).toBe('A request with this Idempotency-Key is still being processed. Wait for its answer; if it was lost, send this same request with the same key once more in a few seconds to get it (not in a loop).');
      expect(busy.headers['retry-after']).toBeUndefined();
      const reused = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'running-1').send({ name: 'Other' }).expect(409);
      expect(await siteCount(t)).toBe(count);
      // while the first request runs, the key is busy whatever the body (that request may yet
      // fail and leave the key free); the body is compared once the first request has finished
      expect(reused.body).toEqual(anError('IDEMPOTENCY_IN_PROGRESS'));
      if (t.kind === 'sqlite') {
        expect(await keyRow(t, 'running-1')).toMatchObject({ state: 'in_progress', lock_token: (claim as Claimed).token });
      } else {
        // Postgres commits nothing before the operation does
        expect(await keyRow(t, 'running-1')).toBeUndefined();
      }

      await releaseIdempotencyKey(t.db.knex, claim as Claimed);
      const ran = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'running-1').send(depot).expect(201);
      expect(ran.headers['idempotent-replayed']).toBeUndefined();
    });

    it('is taken over once its owner is gone: SQLite when its lease ran out, Postgres when its connection ended', async () => {
      const keyId = await keyIdOf(t, t.auth);
      const claim = (await claimIdempotencyKey(t.db.knex, { ttlSeconds: 3600, leaseSeconds: 60 }, keyId, 'stale-1', fingerprint('post', '/v1/sites', depot))) as Claimed;
      await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'stale-1').send(depot).expect(409);
      if (t.kind === 'sqlite') await t.db.knex('idempotency_keys').where({ idempotency_key: 'stale-1' }).update({ locked_until: past() });
      else expect(await terminateClaimOwners(t.db.knex, keyId, 'stale-1')).toBe(1);

      const ran = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'stale-1').send(depot).expect(201);
      expect(ran.headers['idempotent-replayed']).toBeUndefined();
      expect(await keyRow(t, 'stale-1')).toMatchObject({ state: 'completed', response_status: 201, lock_token: null });
      // the dead process's token is worthless now
      await releaseIdempotencyKey(t.db.knex, claim);
      const again = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'stale-1').send(depot).expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.id).toBe(ran.body.id);
    });
  });

  describe('retention', () => {
    it('after expires_at the key starts a new operation, whatever the body', async () => {
      const first = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'expired-1').send(depot).expect(201);
      await t.db.knex('idempotency_keys').where({ idempotency_key: 'expired-1' }).update({ expires_at: past() });
      const next = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'expired-1').send({ name: 'Next' }).expect(201);
      expect(next.headers['idempotent-replayed']).toBeUndefined();
      expect(next.body.id).not.toBe(first.body.id);
      const row = await keyRow(t, 'expired-1');
      expect(row.expires_at > new Date().toISOString()).toBe(true);
      expect((await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'expired-1').send({ name: 'Next' }).expect(201)).body).toEqual(next.body);
    });

    it('an expired claim still held by a live lease stays in progress (a short retention never runs an operation twice at once)', async () => {
      const keyId = await keyIdOf(t, t.auth);
      const claim = await claimIdempotencyKey(t.db.knex, { ttlSeconds: 3600, leaseSeconds: 60 }, keyId, 'expired-running', fingerprint('post', '/v1/sites', depot));
      await t.db.knex('idempotency_keys').where({ idempotency_key: 'expired-running' }).update({ expires_at: past() });
      const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'expired-running').send({ name: 'Other' }).expect(409);
      expect(res.body).toEqual(anError('IDEMPOTENCY_IN_PROGRESS'));
      await releaseIdempotencyKey(t.db.knex, claim as Claimed);
    });

    it('purge deletes expired rows, and only those no live lease holds', async () => {
      const keyId = await keyIdOf(t, await t.newKey());
      const base = { api_key_id: keyId, fingerprint: 'f'.repeat(64), created_at: past() };
      const future = new Date(Date.now() + 3_600_000).toISOString();
      await t.db.knex('idempotency_keys').insert([
        { ...base, idempotency_key: 'p-expired-done', state: 'completed', response_status: 201, expires_at: past() },
        { ...base, idempotency_key: 'p-expired-dead', state: 'in_progress', lock_token: 'a', locked_until: past(), expires_at: past() },
        { ...base, idempotency_key: 'p-expired-live', state: 'in_progress', lock_token: 'b', locked_until: future, expires_at: past() },
        { ...base, idempotency_key: 'p-kept-done', state: 'completed', response_status: 201, expires_at: future },
        { ...base, idempotency_key: 'p-kept-live', state: 'in_progress', lock_token: 'c', locked_until: future, expires_at: future },
      ]);
      const remaining = async () => (await t.db.knex('idempotency_keys').where({ api_key_id: keyId }).orderBy('idempotency_key')).map((r) => r.idempotency_key);

      // a process shutting down starts no delete
      expect(await purgeExpiredIdempotencyKeys(t.db.knex, { batch: 1, stopping: () => true })).toBe(0);
      expect(await purgeExpiredIdempotencyKeys(t.db.knex, { batch: 1, maxBatches: 1 })).toBe(1);
      expect(await remaining()).toHaveLength(4);
      // batches of one: the run goes on until nothing expired is left
      expect(await purgeExpiredIdempotencyKeys(t.db.knex, { batch: 1 })).toBe(1);
      expect(await remaining()).toEqual(['p-expired-live', 'p-kept-done', 'p-kept-live']);
      expect(await purgeExpiredIdempotencyKeys(t.db.knex)).toBe(0);
    });

    it('the app purges in the background, on its timer: expired keys, and events past their retention', async () => {
      const keyId = await keyIdOf(t, await t.newKey());
      await t.db.knex('idempotency_keys').insert({
        api_key_id: keyId, idempotency_key: 'timer', fingerprint: 'f'.repeat(64), state: 'completed', response_status: 204, created_at: past(), expires_at: past(),
      });
      // events: one older than the retention (EVENTS_RETENTION_DAYS, 30 by default), one within it
      const { org_id: orgId } = await t.db.knex('api_keys').where({ id: keyId }).first();
      const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
      const event = (id: string, occurredAt: string) => ({ id, org_id: orgId, type: 'site.created', resource_id: null, data: '{}', changed_fields: null, occurred_at: occurredAt });
      await t.db.knex('events').insert([event('evt_timerexpired000000000000', daysAgo(31)), event('evt_timerkept000000000000000', daysAgo(29))]);
      const eventIds = async () => (await t.db.knex('events').whereIn('id', ['evt_timerexpired000000000000', 'evt_timerkept000000000000000']).pluck('id')).sort();
      const app = createApp(t.config, { db: t.db.knex, purgeIntervalMs: 20 });
      try {
        const deadline = Date.now() + 3000;
        while (((await keyRow(t, 'timer')) || (await eventIds()).length > 1) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        expect(await keyRow(t, 'timer')).toBeUndefined();
        expect(await eventIds()).toEqual(['evt_timerkept000000000000000']);
      } finally {
        app.close();
      }
    });
  });
}, { MAX_BODY_BYTES: '4096' });

describeEachDatabase('idempotency with IDEMPOTENCY_TTL_SECONDS=1', (t) => {
  it('replays within the retention and starts a new operation after it', async () => {
    const first = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'ttl-1').send(depot).expect(201);
    const row = await keyRow(t, 'ttl-1');
    expect(Date.parse(row.expires_at) - Date.parse(row.created_at)).toBe(1000);
    expect((await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'ttl-1').send(depot).expect(201)).headers['idempotent-replayed']).toBe('true');

    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(row.expires_at) - Date.now()) + 20));
    const later = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'ttl-1').send(depot).expect(201);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(later.body).toEqual({ ...first.body, id: anId('site'), createdAt: expect.any(String), updatedAt: expect.any(String) });
    expect(later.body.id).not.toBe(first.body.id);
    expect(await purgeExpiredIdempotencyKeys(t.db.knex)).toBe(0); // the key's row is the new operation's now
  });
}, { IDEMPOTENCY_TTL_SECONDS: '1' });
