import openapi from '../generated/openapi.json';
import openapiSdk from '../generated/openapi-sdk.json';
import { describeEachDatabase, anError, anId, aTimestamp } from './support/testApp';
import { EVENT_TYPES } from '../runtime/domain/eventTypes';
import { changedFields, purgeExpiredEvents, readEventFeed, recordEvent } from '../runtime/domain/events';
import { createCheckin } from '../runtime/domain/checkins';
import { encodeFeedCursor, eventIdsInWindow, findEvent, firstSeqAtOrAfter } from '../runtime/storage/repositories/eventsRepository';
import { committedReads } from '../runtime/storage/committedReads';
import { newId } from '../runtime/ids';
import { beginWriteTransaction, inWriteTransaction } from '../runtime/storage/writeTransaction';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** A whole site as GET answers it (the contract's example), for events these tests record themselves: the feed's answers are checked against the contract. */
const siteData = (id: string, name?: string) => ({ ...(openapi as any).webhooks['site.created'].post.requestBody.content['application/json'].example.data, id, ...(name === undefined ? {} : { name }) });

describe('event types: one source', () => {
  it('the contract enum, the webhooks section (3.1 and the SDK document) and the code list are the same', () => {
    const doc = openapi as any;
    expect([...doc.components.schemas.EventType.enum].sort()).toEqual([...EVENT_TYPES]);
    // and the one message that is not an event: the test message a ping sends (pingIntegrationSubscription)
    const delivered = [...EVENT_TYPES, 'webhook.ping'].sort();
    expect(Object.keys(doc.webhooks).sort()).toEqual(delivered);
    expect(Object.keys((openapiSdk as any)['x-webhooks']).sort()).toEqual(delivered);
    const resolve = (schema: any) => (schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema);
    for (const type of EVENT_TYPES) {
      const body = doc.webhooks[type].post.requestBody.content['application/json'];
      expect(body.example.type).toBe(type);
      // a typed SDK must read `sequence` as 64 bits in every delivered shape, as in the feed
      expect({ type, sequence: resolve(resolve(body.schema).properties.sequence) }).toMatchObject({ type, sequence: { type: 'integer', format: 'int64' } });
    }
    expect(resolve(doc.components.schemas.Event.properties.sequence).format).toBe('int64');
    expect(resolve(doc.components.schemas.IntegrationEvent.properties.sequence).format).toBe('int64');
  });

  it('the feed event and the delivered event say, per type, what data holds: the same as that type\'s webhook', () => {
    const doc = openapi as any;
    const schemas = doc.components.schemas;
    const webhookBody = (type: string) => schemas[doc.webhooks[type].post.requestBody.content['application/json'].schema.$ref.split('/').pop()];
    // the feed (GET /v1/events): one variant per type, its data schema and required fields those of the webhook
    const feedVariants = schemas.Event.oneOf.map((v: any) => ({ type: v.properties.type.const, data: v.properties.data, required: v.required, declared: Object.keys(v.properties) }));
    expect(feedVariants.map((v: { type: string }) => v.type).sort()).toEqual([...EVENT_TYPES]);
    for (const variant of feedVariants) {
      const body = webhookBody(variant.type);
      const required = ['type', 'data', ...body.required.filter((name: string) => !['id', 'type', 'timestamp', 'sequence', 'data'].includes(name))];
      // a required field is declared in the variant too, or generated clients leave it optional
      expect({ type: variant.type, data: variant.data, required: variant.required, declared: variant.declared })
        .toEqual({ type: variant.type, data: body.properties.data, required, declared: required });
    }
    // the delivered shape (trigger samples): one of the webhook bodies, told apart by type
    const delivered = schemas.IntegrationEvent;
    expect(delivered.oneOf.map((v: any) => v.$ref).sort()).toEqual(EVENT_TYPES.map((type) => doc.webhooks[type].post.requestBody.content['application/json'].schema.$ref).sort());
    expect(delivered.discriminator.propertyName).toBe('type');
    for (const type of EVENT_TYPES) expect({ type, ref: delivered.discriminator.mapping[type] }).toEqual({ type, ref: doc.webhooks[type].post.requestBody.content['application/json'].schema.$ref });
    // the SDK document keeps both
    const sdk = (openapiSdk as any).components.schemas;
    expect(sdk.Event.oneOf).toHaveLength(EVENT_TYPES.length);
    expect(sdk.Event.oneOf[0].properties.type).toEqual({ enum: [feedVariants[0].type] });
    expect(sdk.IntegrationEvent.discriminator.mapping).toEqual(delivered.discriminator.mapping);
  });

  it('changedFields names the fields whose value differs, deeply, without updatedAt', () => {
    expect(changedFields(
      { id: 'a', status: 'active', coordinates: { latitude: 1, longitude: 2 }, note: null, updatedAt: 'x' },
      { id: 'a', status: 'active', coordinates: { latitude: 1, longitude: 3 }, note: 'n', updatedAt: 'y' },
    )).toEqual(['coordinates', 'note']);
  });
});

describeEachDatabase('the change feed', (t) => {
  const feed = async (auth: string, query = '') => (await t.http.get(`/v1/events${query}`).set('Authorization', auth).expect(200)).body;
  async function orgIdOf(name: string): Promise<string> {
    return (await t.db.knex('organizations').where({ name }).first()).id;
  }

  it('an unknown query parameter is answered with the ones the feed takes (after, where other lists take cursor)', async () => {
    const res = await t.http.get('/v1/events?cursor=abc').set('Authorization', t.auth).expect(400);
    const hint = "is not a known field; this operation's query parameters are types, resourceId, after, afterEvent, since, limit";
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { error: `/query/cursor: ${hint}`, details: [{ path: '/query/cursor', message: hint }] }));
    const none = await t.http.get('/v1/events/evt_x?limit=5').set('Authorization', t.auth).expect(400);
    expect(none.body.details).toEqual([{ path: '/query/limit', message: 'is not a known field; this operation takes no query parameters' }]);
  });

  it('records each check-in write as one event, data exactly as GET answers it, oldest first', async () => {
    const auth = await t.newKey({ organization: 'feed-checkins' });
    const created = (await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|f', siteId: 'site_f' }).expect(201)).body;
    const activated = (await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ status: 'active' }).expect(200)).body;
    const updated = (await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ checkInAddress: 'Gate 4' }).expect(200)).body;
    const out = (await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ status: 'checked_out' }).expect(200)).body;
    // a refused write records nothing
    await t.http.patch(`/v1/checkins/${created.id}`).set('Authorization', auth).send({ status: 'active' }).expect(409);

    const page = await feed(auth);
    expect(page.data).toEqual([
      { id: anId('evt'), type: 'checkin.created', sequence: expect.any(Number), occurredAt: aTimestamp(), data: created },
      // update events carry each changed field's value from before the change, as GET showed it then
      { id: anId('evt'), type: 'checkin.activated', sequence: expect.any(Number), occurredAt: aTimestamp(), data: activated, changedFields: ['checkedInAt', 'status'], previousValues: { checkedInAt: null, status: 'pre_checkin' } },
      { id: anId('evt'), type: 'checkin.updated', sequence: expect.any(Number), occurredAt: aTimestamp(), data: updated, changedFields: ['checkInAddress'], previousValues: { checkInAddress: null } },
      { id: anId('evt'), type: 'checkin.checked_out', sequence: expect.any(Number), occurredAt: aTimestamp(), data: out, changedFields: ['checkedOutAt', 'status'], previousValues: { checkedOutAt: null, status: 'active' } },
    ]);
    const sequences = page.data.map((e: { sequence: number }) => e.sequence);
    expect([...sequences].sort((a, b) => a - b)).toEqual(sequences);
    expect(new Set(sequences).size).toBe(4);
    expect(page.data[3].data).toEqual((await t.http.get(`/v1/checkins/${created.id}`).set('Authorization', auth).expect(200)).body);

    expect((await t.http.get(`/v1/events/${page.data[1].id}`).set('Authorization', auth).expect(200)).body).toEqual(page.data[1]);
    const stranger = await t.newKey({ organization: 'feed-stranger' });
    expect((await t.http.get(`/v1/events/${page.data[1].id}`).set('Authorization', stranger).expect(404)).body).toEqual(anError('NOT_FOUND'));
    expect((await feed(stranger)).data).toEqual([]);
  });

  it('records a deletion as a tombstone, and an idempotent replay records nothing new', async () => {
    const auth = await t.newKey({ organization: 'feed-delete' });
    const site = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Gone soon' }).expect(201)).body;
    await t.http.delete(`/v1/sites/${site.id}`).set('Authorization', auth).set('Idempotency-Key', 'del-1').expect(204);
    await t.http.delete(`/v1/sites/${site.id}`).set('Authorization', auth).set('Idempotency-Key', 'del-1').expect(204);
    const page = await feed(auth, '?types=site.deleted');
    expect(page.data).toEqual([{ id: anId('evt'), type: 'site.deleted', sequence: expect.any(Number), occurredAt: aTimestamp(), data: { id: site.id, deleted: true } }]);
  });

  it('filters by types and resourceId, walks page by page exactly once, and resumes from the last cursor', async () => {
    const auth = await t.newKey({ organization: 'feed-walk' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: `auth0|${i}`, siteId: 's' }).expect(201)).body.id);
    await t.http.patch(`/v1/checkins/${ids[2]}`).set('Authorization', auth).send({ status: 'active' }).expect(200);

    expect((await feed(auth, '?types=checkin.activated')).data.map((e: any) => e.data.id)).toEqual([ids[2]]);
    expect((await feed(auth, `?resourceId=${ids[2]}`)).data.map((e: any) => e.type)).toEqual(['checkin.created', 'checkin.activated']);
    expect((await feed(auth, '?types=checkin.created,checkin.activated&limit=100')).data).toHaveLength(6);
    // the patterns a subscription lists: a resource's types, or every type
    await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Among the check-ins' }).expect(201);
    const everything = (await feed(auth, '?limit=100')).data;
    expect(everything.map((e: any) => e.type)).toEqual([...Array(5).fill('checkin.created'), 'checkin.activated', 'site.created']);
    expect((await feed(auth, '?types=checkin.*&limit=100')).data).toEqual(everything.slice(0, 6));
    expect((await feed(auth, '?types=site.*,checkin.activated&limit=100')).data).toEqual(everything.slice(5));
    expect((await feed(auth, '?types=*&limit=100')).data).toEqual(everything);
    for (const types of ['planet.*', 'checkin.**', '*.created']) {
      const res = await t.http.get('/v1/events').query({ types }).set('Authorization', auth).expect(400);
      expect(res.body.details).toEqual([{ path: '/query/types', message: expect.stringMatching(/^unknown event type .*; known: asset\.created, .*, and the patterns \* and <resource>\.\*$/) }]);
    }

    const seen: string[] = [];
    let after: string | undefined;
    for (let i = 0; i < 20; i++) {
      const page = await feed(auth, `?limit=2${after ? `&after=${after}` : ''}`);
      expect(page.nextCursor).toEqual(expect.any(String));
      after = page.nextCursor;
      if (!page.data.length) break;
      seen.push(...page.data.map((e: any) => e.id));
    }
    expect(seen).toEqual((await feed(auth, '?limit=100')).data.map((e: any) => e.id));
    expect(new Set(seen).size).toBe(7);
    // the cursor at the end of the feed picks up what happens next
    await t.http.patch(`/v1/checkins/${ids[0]}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    expect((await feed(auth, `?after=${after}`)).data.map((e: any) => [e.type, e.data.id])).toEqual([['checkin.activated', ids[0]]]);

    const unknown = await t.http.get('/v1/events?types=checkin.exploded').set('Authorization', auth).expect(400);
    expect(unknown.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/types', message: expect.stringContaining('unknown event type checkin.exploded') }] }));
    // …also a name that is not even shaped like one, or an empty one: told the known types, not a pattern
    // each unknown name once, however often it was sent
    const repeated = await t.http.get('/v1/events').query({ types: `foo,${',foo'.repeat(50)}` }).set('Authorization', auth).expect(400);
    expect(repeated.body.details[0].message).toMatch(/^unknown event type foo, "" \(an empty name between commas\); known: /);
    for (const types of ['checkin.activated,foo', 'checkin.activated,,site.created', 'Site.Created']) {
      const res = await t.http.get('/v1/events').query({ types }).set('Authorization', auth).expect(400);
      expect(res.body.details).toEqual([{ path: '/query/types', message: expect.stringMatching(/^unknown event type .*; known: asset\.created, asset\.deleted, /) }]);
    }
    const malformed = await t.http.get('/v1/events?after=garbage').set('Authorization', auth).expect(400);
    expect(malformed.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/after', message: 'is not a cursor issued by this API' }] }));
    // a cursor's time decides its 410: one that is no time the server writes, or lies in the future,
    // would pass that check and walk on past purged events
    for (const occurredAt of ['not-a-date', '9999-12-31T23:59:59.999Z', new Date(Date.now() + 3_600_000).toISOString(), '2026-11-25']) {
      const forged = await t.http.get(`/v1/events?after=${encodeFeedCursor({ seq: 0, occurredAt })}`).set('Authorization', auth).expect(400);
      expect(forged.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/after', message: 'is not a cursor issued by this API' }] }));
    }
    // within the clocks' skew a cursor from a host whose clock runs ahead is still taken
    await t.http.get(`/v1/events?after=${encodeFeedCursor({ seq: 0, occurredAt: new Date(Date.now() + 60_000).toISOString() })}`).set('Authorization', auth).expect(200);
  });

  it('resumes after an event known by its id (afterEvent): what a webhook receiver knows after an outage', async () => {
    const auth = await t.newKey({ organization: 'feed-after-event' });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: `auth0|ae${i}`, siteId: 's' }).expect(201)).body.id);
    await t.http.patch(`/v1/checkins/${ids[1]}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    await t.http.patch(`/v1/checkins/${ids[3]}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    const all = (await feed(auth, '?limit=100')).data;
    expect(all).toHaveLength(6);

    // the page after an event is the rest of the feed, exactly; then nextCursor walks on
    const rest = await feed(auth, `?afterEvent=${all[1].id}&limit=3`);
    expect(rest.data).toEqual(all.slice(2, 5));
    expect((await feed(auth, `?after=${rest.nextCursor}`)).data).toEqual(all.slice(5));
    // with the subscription's types, as a receiver of only those would ask
    expect((await feed(auth, `?afterEvent=${all[2].id}&types=checkin.activated`)).data).toEqual([all[4], all[5]]);
    expect((await feed(auth, `?afterEvent=${all[4].id}&types=checkin.created`)).data).toEqual([]);
    // after the last event: nothing yet, and the cursor picks up what comes next
    const end = await feed(auth, `?afterEvent=${all[5].id}`);
    expect(end.data).toEqual([]);
    await t.http.patch(`/v1/checkins/${ids[0]}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    expect((await feed(auth, `?after=${end.nextCursor}`)).data.map((e: any) => [e.type, e.data.id])).toEqual([['checkin.activated', ids[0]]]);

    // an id that is not one of this organization's events is refused, never walked from a guess
    const stranger = await t.newKey({ organization: 'feed-after-event-stranger' });
    for (const [key, id] of [[stranger, all[1].id], [auth, newId('evt')], [auth, 'evt_nonsense'], [auth, ids[0]]]) {
      const refused = await t.http.get('/v1/events').query({ afterEvent: id }).set('Authorization', key).expect(400);
      expect(refused.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/afterEvent', message: 'is not the id of an event of this organization' }] }));
    }
    const both = await t.http.get('/v1/events').query({ afterEvent: all[1].id, after: rest.nextCursor }).set('Authorization', auth).expect(400);
    expect(both.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/afterEvent', message: 'cannot be combined with after' }] }));
  });

  it('starts at a time (since): the first event that occurred at or after it, then nextCursor walks on', async () => {
    const auth = await t.newKey({ organization: 'feed-since' });
    const other = await t.newKey({ organization: 'feed-since-other' });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: `auth0|since${i}`, siteId: 's' }).expect(201)).body.id);
      // another organization's events in between: one order for all, skipped by the walk
      await t.http.post('/v1/sites').set('Authorization', other).send({ name: `Between ${i}` }).expect(201);
      await sleep(15); // each event its own millisecond
    }
    const all = (await feed(auth, '?limit=100')).data;
    expect(all.map((e: any) => e.data.id)).toEqual(ids);
    // exactly at an event's time, and just after the one before it: the same start
    expect((await feed(auth, `?since=${all[1].occurredAt}`)).data).toEqual(all.slice(1));
    const justAfter = new Date(Date.parse(all[0].occurredAt) + 1).toISOString();
    const page = await feed(auth, `?since=${justAfter}&limit=1`);
    expect(page.data).toEqual([all[1]]);
    expect((await feed(auth, `?after=${page.nextCursor}`)).data).toEqual([all[2]]);
    // with a filter, and from before everything
    expect((await feed(auth, `?since=${all[0].occurredAt}&types=checkin.created&limit=100`)).data).toEqual(all);
    // after the last event: nothing yet, and the cursor picks up what comes next
    await sleep(5);
    const end = await feed(auth, `?since=${new Date().toISOString()}`);
    expect(end.data).toEqual([]);
    await t.http.patch(`/v1/checkins/${ids[0]}`).set('Authorization', auth).send({ status: 'active' }).expect(200);
    expect((await feed(auth, `?after=${end.nextCursor}`)).data.map((e: any) => [e.type, e.data.id])).toEqual([['checkin.activated', ids[0]]]);

    // older than the retention: events after it may be gone
    const old = await t.http.get('/v1/events').query({ since: new Date(Date.now() - 31 * 86_400_000).toISOString() }).set('Authorization', auth).expect(410);
    expect(old.body).toEqual(anError('CURSOR_EXPIRED'));
    for (const [query, path] of [
      [{ since: all[0].occurredAt, after: page.nextCursor }, '/query/since'], [{ since: all[0].occurredAt, afterEvent: all[0].id }, '/query/since'],
      [{ since: 'yesterday' }, '/query/since'], [{ since: new Date(Date.now() + 60_000).toISOString() }, '/query/since'],
    ] as const) {
      const refused = await t.http.get('/v1/events').query(query).set('Authorization', auth).expect(400);
      expect([JSON.stringify(query), refused.body.code, refused.body.details[0].path]).toEqual([JSON.stringify(query), 'VALIDATION_ERROR', path]);
    }
    // an offset's + written as is arrives as a space: the refusal says how to write it
    const plus = await t.http.get('/v1/events?since=2026-11-25T10:00:00+01:00').set('Authorization', auth).expect(400);
    expect(plus.body.details).toEqual([{ path: '/query/since', message: expect.stringContaining("a + in a URL's query is read as a space: write the offset +01:00 as %2B01:00") }]);
    expect(plus.body.error).toBe(`/query/since: ${plus.body.details[0].message}`); // the message leads with the same words
    // …and only then: a space for the T, or a time without an offset, is not told about a +
    for (const since of ['2026-11-25 10:00', '2026-11-25T10:00']) {
      const refused = await t.http.get('/v1/events').query({ since }).set('Authorization', auth).expect(400);
      expect([since, refused.body.details[0].message]).toEqual([since, expect.not.stringContaining('%2B')]);
    }
    const minuteAgo = new Date(Date.now() - 60_000).toISOString();
    const escaped = await t.http.get(`/v1/events?since=${encodeURIComponent(minuteAgo.replace('Z', '+00:00'))}`).set('Authorization', auth).expect(200);
    expect(escaped.body.data).toEqual((await feed(auth, `?since=${minuteAgo}`)).data);
  });

  it('answers 410 CURSOR_EXPIRED for afterEvent naming an event older than the retention, purged or not yet', async () => {
    const auth = await t.newKey({ organization: 'feed-after-event-expired' });
    const orgId = await orgIdOf('feed-after-event-expired');
    const now = Date.now();
    const made = (msAgo: number) => {
      const clock = jest.spyOn(Date, 'now').mockReturnValue(now - msAgo);
      try {
        return newId('evt');
      } finally {
        clock.mockRestore();
      }
    };
    // purged: no such event any more, and its id says it was made 31 days ago
    const purged = await t.http.get('/v1/events').query({ afterEvent: made(31 * 86_400_000) }).set('Authorization', auth).expect(410);
    expect(purged.body).toEqual(anError('CURSOR_EXPIRED'));
    // an unknown id made within the retention is not taken for a purged one
    await t.http.get('/v1/events').query({ afterEvent: made(29 * 86_400_000) }).set('Authorization', auth).expect(400);
    // still stored, but older than the retention: the purge may have taken what followed it
    const id = made(40 * 86_400_000);
    await t.db.knex('events').insert({ id, org_id: orgId, type: 'site.created', resource_id: 'site_x', data: JSON.stringify({ id: 'site_x' }), changed_fields: null, occurred_at: new Date(now - 40 * 86_400_000).toISOString() });
    expect((await t.http.get('/v1/events').query({ afterEvent: id }).set('Authorization', auth).expect(410)).body).toEqual(anError('CURSOR_EXPIRED'));
  });

  it('answers 410 CURSOR_EXPIRED for a cursor older than the retention, and purges old events in batches', async () => {
    const auth = await t.newKey({ organization: 'feed-retention' });
    const orgId = await orgIdOf('feed-retention');
    const old = new Date(Date.now() - 40 * 86_400_000).toISOString();
    // the purge walks the feed from its start (seq order, which is the order of recording): the
    // events the earlier tests of this file recorded are made as old as the ones inserted here
    await t.db.knex('events').update({ occurred_at: old });
    for (let i = 0; i < 3; i++) {
      await t.db.knex('events').insert({ id: newId('evt'), org_id: orgId, type: 'site.created', resource_id: `site_${i}`, data: JSON.stringify({ id: `site_${i}` }), changed_fields: null, occurred_at: old });
    }
    await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|r', siteId: 's' }).expect(201);
    // a walk from the start begins after what the purge has yet to remove: never a page whose
    // cursor the next request would refuse (started again, such a walk would meet it again)
    const first = await feed(auth, '?limit=1');
    expect(first.data.map((e: any) => e.type)).toEqual(['checkin.created']);
    expect((await feed(auth, `?after=${first.nextCursor}`)).data).toEqual([]);
    // a cursor from before the retention is refused
    const oldest = await t.db.knex('events').where({ org_id: orgId }).orderBy('seq').first('seq');
    const stale = encodeFeedCursor({ seq: Number(oldest.seq), occurredAt: old });
    const expired = await t.http.get(`/v1/events?after=${stale}`).set('Authorization', auth).expect(410);
    expect(expired.body).toEqual(anError('CURSOR_EXPIRED'));

    // delivery attempts are kept as long: those started before the retention go, in batches too
    const attempt = (deliveryId: string, startedAt: string) => ({
      org_id: orgId, subscription_id: 'whs_purge', delivery_id: deliveryId, attempt: 1, target_url: 'https://hooks.example.com/purge', started_at: startedAt, duration_ms: 5, outcome: 'failed', response_status: 500, response_excerpt: 'x',
    });
    await t.db.knex('webhook_delivery_attempts').insert([...[1, 2, 3].map((i) => attempt(`whd_old_${i}`, old)), attempt('whd_fresh', new Date().toISOString())]);
    // …and a delivery made before the retention goes with its attempts, however recent (a late retry)
    await t.db.knex('webhook_deliveries').insert({
      id: 'whd_old_retried', org_id: orgId, subscription_id: 'whs_purge', event_id: 'evt_gone', event_type: 'site.created', status: 'failed', attempts: 1,
      next_attempt_at: null, created_at: old, updated_at: new Date().toISOString(),
    });
    await t.db.knex('webhook_delivery_attempts').insert(attempt('whd_old_retried', new Date().toISOString()));

    const before = Number((await t.db.knex('events').count({ n: '*' }))[0].n);
    expect(before).toBeGreaterThan(4);
    expect(await purgeExpiredEvents(t.db.knex, 30, { batch: 2 })).toBe(before - 1);
    expect((await t.db.knex('webhook_delivery_attempts').where({ subscription_id: 'whs_purge' }).select('delivery_id')).map((r) => r.delivery_id)).toEqual(['whd_fresh']);
    expect((await feed(auth)).data.map((e: any) => e.type)).toEqual(['checkin.created']);
    expect(Number((await t.db.knex('events').count({ n: '*' }))[0].n)).toBe(1);
    // expired events recorded after a live one (stamped by a clock stepped back) are found past it
    for (let i = 0; i < 3; i++) {
      await t.db.knex('events').insert({ id: newId('evt'), org_id: orgId, type: 'site.created', resource_id: `site_late_${i}`, data: JSON.stringify({ id: `site_late_${i}` }), changed_fields: null, occurred_at: old });
    }
    expect(await purgeExpiredEvents(t.db.knex, 30, { batch: 2 })).toBe(3);
    expect((await feed(auth)).data.map((e: any) => e.type)).toEqual(['checkin.created']);
    const fresh = encodeFeedCursor({ seq: 0, occurredAt: new Date().toISOString() });
    await t.http.get(`/v1/events?after=${fresh}`).set('Authorization', auth).expect(200);
  });

  it('the cursor at the end of a quiet feed ages from the read, not from the last event: polling keeps it fresh', async () => {
    const auth = await t.newKey({ organization: 'feed-quiet' });
    const start = (await feed(auth, '?types=log.created')).nextCursor; // before anything happened
    const log = (await t.http.post('/v1/logs').set('Authorization', auth).send({ entityType: 'checkin', entityId: 'chk_quiet', message: 'one' }).expect(201)).body;
    // its only event, 62 s inside the 30-day retention; a cursor within 60 s of its edge counts as expired
    await t.db.knex('events').where({ resource_id: log.id }).update({ occurred_at: new Date(Date.now() - 30 * 86_400_000 + 62_000).toISOString() });
    const page = await feed(auth, `?types=log.created&after=${start}`);
    expect(page.data.map((e: any) => e.data.id)).toEqual([log.id]);
    await sleep(3000);
    // a cursor carrying that event's time would now be refused: the one issued is as old as the read
    const again = await feed(auth, `?types=log.created&after=${page.nextCursor}`);
    expect(again.data).toEqual([]);
    const next = (await t.http.post('/v1/logs').set('Authorization', auth).send({ entityType: 'checkin', entityId: 'chk_quiet', message: 'two' }).expect(201)).body;
    expect((await feed(auth, `?types=log.created&after=${again.nextCursor}`)).data.map((e: any) => e.data.id)).toEqual([next.id]);
    // the same from the first cursor: nothing skipped
    expect((await feed(auth, `?types=log.created&after=${page.nextCursor}`)).data.map((e: any) => e.data.id)).toEqual([next.id]);

    // with a filter, the end cursor points past the events the read could see that did not match
    // too: reused without the filter it never steps back over them (they may be purged by then)
    const checkin = (await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|quiet', siteId: 'site_quiet' }).expect(201)).body;
    const end = await feed(auth, `?types=log.created&after=${again.nextCursor}`);
    expect(end.data.map((e: any) => e.data.id)).toEqual([next.id]);
    expect((await feed(auth, `?after=${end.nextCursor}`)).data).toEqual([]);
    expect((await feed(auth, `?after=${again.nextCursor}`)).data.map((e: any) => e.data.id)).toEqual([next.id, checkin.id]);
  });

  it('finds a time window\'s events by seq without an index on the time: exactly, across gaps in seq and other organizations\' events', async () => {
    await t.newKey({ organization: 'feed-window' });
    const orgId = await orgIdOf('feed-window');
    await t.newKey({ organization: 'feed-window-other' });
    const otherId = await orgIdOf('feed-window-other');
    // this file's earlier events are older than every event below
    await t.db.knex('events').update({ occurred_at: '2020-01-01T00:00:00.000Z' });
    const at = (minute: number) => new Date(Date.UTC(2026, 0, 1, 0, minute)).toISOString();
    const inserted: { id: string; minute: number; org: string; type: string }[] = [];
    for (let minute = 0; minute < 120; minute++) {
      const org = minute % 3 === 0 ? otherId : orgId;
      const type = minute % 2 ? 'site.created' : 'site.updated';
      const id = newId('evt');
      await t.db.knex('events').insert({ id, org_id: org, type, resource_id: `site_${minute}`, data: '{}', changed_fields: null, occurred_at: at(minute) });
      inserted.push({ id, minute, org, type });
    }
    // gaps in seq: some rows removed
    const removed = inserted.filter((e) => e.minute % 7 === 0);
    await t.db.knex('events').whereIn('id', removed.map((e) => e.id)).delete();
    const kept = inserted.filter((e) => e.minute % 7 !== 0);

    const expected = (from: number, to: number, types: string[]) =>
      kept.filter((e) => e.org === orgId && types.includes(e.type) && e.minute >= from && e.minute < to).map((e) => e.id);
    for (const [from, to] of [[0, 120], [10, 11], [13, 50], [14, 15], [100, 200], [119, 120]]) {
      for (const types of [['site.created'], ['site.created', 'site.updated']]) {
        const found = await eventIdsInWindow(t.db.knex, orgId, types, at(from), at(to), 1000);
        expect(found.map((e) => e.id)).toEqual(expected(from, to, types));
      }
    }
    expect(await eventIdsInWindow(t.db.knex, orgId, ['site.created'], at(500), at(600), 1000)).toEqual([]);
    // the binary search itself: the first event at or after a time, past the removed rows
    const seqOf = async (id: string) => Number((await t.db.knex('events').where({ id }).first('seq')).seq);
    expect(await firstSeqAtOrAfter(t.db.knex, at(14))).toBe(await seqOf(kept.find((e) => e.minute === 15)!.id));
    expect(await firstSeqAtOrAfter(t.db.knex, at(0))).toBe(await seqOf(kept[0].id));
    expect(await firstSeqAtOrAfter(t.db.knex, new Date(Date.parse(at(119)) + 1).toISOString())).toBeUndefined();
    expect(await firstSeqAtOrAfter(t.db.knex, '2000-01-01T00:00:00.000Z')).toBe(Number((await t.db.knex('events').min({ s: 'seq' }).first())!.s));

    // a server's clock stepped back by 8 minutes between two events (less than the 10 the search
    // allows for): the event stamped earlier, recorded later, is still found in its window
    const recorded: Record<string, string> = {};
    for (const minute of [195, 187, 196]) {
      recorded[minute] = newId('evt');
      await t.db.knex('events').insert({ id: recorded[minute], org_id: orgId, type: 'site.created', resource_id: null, data: '{}', changed_fields: null, occurred_at: at(minute) });
    }
    expect((await eventIdsInWindow(t.db.knex, orgId, ['site.created'], at(187), at(188), 1000)).map((e) => e.id)).toEqual([recorded[187]]);
    expect((await eventIdsInWindow(t.db.knex, orgId, ['site.created'], at(186), at(197), 1000)).map((e) => e.id)).toEqual([recorded[195], recorded[187], recorded[196]]);
  });

  it('needs the events:read scope', async () => {
    const noScope = await t.newKey({ scopes: ['checkins:read'] });
    const res = await t.http.get('/v1/events').set('Authorization', noScope).expect(403);
    expect(res.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="events:read"');
  });

  it('reads committed events only: an event whose write is still open is neither in the feed nor found by id', async () => {
    // On SQLite a write transaction of the process is open in its group commit, on the very
    // connection the server writes with; its COMMIT could still fail, and a feed that showed the
    // event would have handed out a cursor past it (storage/committedReads.ts). The reads go
    // through the feed's own functions here: over HTTP the request's key lookup would wait for
    // that one connection, as every statement of the process does while a transaction holds it.
    await t.newKey({ organization: 'feed-open-write' });
    const orgId = await orgIdOf('feed-open-write');
    const within = async <T>(promise: Promise<T>) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('the read waited for the open write')), 3000); });
      try {
        return await Promise.race([promise, late]);
      } finally {
        clearTimeout(timer); // a timer left running would hold the test worker after the file ends
      }
    };
    const trx = await beginWriteTransaction(t.db.knex);
    try {
      const openId = await recordEvent(trx.knex, orgId, { type: 'site.created', data: siteData('site_stillopen', 'Open') });
      expect((await within(readEventFeed(t.db.knex, orgId, { limit: 50 }, 30))).data).toEqual([]);
      expect(await within(findEvent(committedReads(t.db.knex), orgId, openId))).toBeUndefined();
    } finally {
      await trx.rollback();
    }
    // a write transaction's own handle reads inside that transaction: it finds its own event
    // (on Postgres the event's insert was sent without waiting and is answered first)
    const own = await beginWriteTransaction(t.db.knex);
    try {
      const ownId = await recordEvent(own.knex, orgId, { type: 'site.created', data: siteData('site_ownread', 'Own') });
      expect(committedReads(own.knex)).toBe(own.knex);
      expect(await findEvent(committedReads(own.knex), orgId, ownId)).toMatchObject({ id: ownId, type: 'site.created' });
    } finally {
      await own.rollback();
    }
    if (t.kind !== 'sqlite') return;

    // SQLite: a write whose COMMIT fails after it left its group commit, read meanwhile. The
    // foreign key is checked at COMMIT (deferred), and the event's organization does not exist.
    const ghost = 'org_ghostofthefeed00000000';
    const failing = inWriteTransaction(t.db.knex, async (trx) => {
      await trx.raw('PRAGMA defer_foreign_keys = ON');
      return recordEvent(trx, ghost, { type: 'site.created', data: siteData('site_nevercommitted') });
    }).then(() => 'committed', (err: Error) => err.message);
    const readMeanwhile = readEventFeed(t.db.knex, ghost, { limit: 50 }, 30);
    expect(await failing).toMatch(/FOREIGN KEY constraint failed/);
    expect((await readMeanwhile).data).toEqual([]);
  });

  describe('the event is part of the write', () => {
    it('a write that fails after recording its event leaves neither the change nor the event', async () => {
      await t.newKey({ organization: 'feed-rollback' });
      const orgId = await orgIdOf('feed-rollback');
      await expect(t.db.knex.transaction(async (trx) => {
        await createCheckin(trx, orgId, { userId: 'auth0|rb', siteId: 's', status: 'pre_checkin' });
        expect(Number((await trx('events').where({ org_id: orgId }).count({ n: '*' }).first())?.n)).toBe(1);
        throw new Error('a later statement failed');
      })).rejects.toThrow('a later statement failed');
      expect(await t.db.knex('events').where({ org_id: orgId }).select('id')).toEqual([]);
      expect(await t.db.knex('checkins').where({ org_id: orgId }).select('id')).toEqual([]);
    });

    it('through HTTP: when storing the idempotent answer (after the event) fails, the request answers 500 and records nothing', async () => {
      const auth = await t.newKey({ organization: 'feed-trigger' });
      const orgId = await orgIdOf('feed-trigger');
      if (t.kind === 'sqlite') {
        await t.db.knex.raw(`create trigger fail_store before update on idempotency_keys when new.state = 'completed' begin select raise(abort, 'refused by test trigger'); end`);
      } else {
        await t.db.knex.raw(`create function fail_store() returns trigger language plpgsql as $$ begin if new.state = 'completed' then raise exception 'refused by test trigger'; end if; return new; end $$`);
        await t.db.knex.raw('create trigger fail_store before update on idempotency_keys for each row execute function fail_store()');
      }
      try {
        const res = await t.http.post('/v1/checkins').set('Authorization', auth).set('Idempotency-Key', 'will-fail').send({ userId: 'auth0|t', siteId: 's' }).expect(500);
        expect(res.body).toEqual(anError('INTERNAL'));
      } finally {
        await t.db.knex.raw(t.kind === 'sqlite' ? 'drop trigger fail_store' : 'drop trigger fail_store on idempotency_keys');
      }
      expect(await t.db.knex('events').where({ org_id: orgId }).select('id')).toEqual([]);
      expect(await t.db.knex('checkins').where({ org_id: orgId }).select('id')).toEqual([]);
    });
  });

  // Postgres only: there `seq` is assigned at INSERT and visible at COMMIT (see test/listOrdering.test.ts).
  const itOnPostgres = t.kind === 'postgres' ? it : it.skip;

  itOnPostgres('a walk never skips an event whose transaction commits after a later one started', async () => {
    const auth = await t.newKey({ organization: 'feed-race' });
    const orgId = await orgIdOf('feed-race');
    await t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|p1', siteId: 's' }).expect(201);
    const first = await feed(auth);
    const trx = await t.db.knex.transaction();
    let b: Promise<{ status: number }> | undefined;
    try {
      await recordEvent(trx, orgId, { type: 'site.created', data: siteData('site_a') });
      let bDone = false;
      b = t.http.post('/v1/checkins').set('Authorization', auth).send({ userId: 'auth0|b', siteId: 's' }).then((res) => { bDone = true; return res; });
      await sleep(300);
      const blocked = !bDone;
      const during = await feed(auth, `?after=${first.nextCursor}`);
      await trx.commit();
      expect((await b).status).toBe(201);
      const afterCommit = await feed(auth, `?after=${during.nextCursor}`);
      expect({ blocked, during: during.data.length, after: afterCommit.data.map((e: any) => e.type) }).toEqual({ blocked: true, during: 0, after: ['site.created', 'checkin.created'] });
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
      await b?.catch(() => undefined);
    }
  });

  itOnPostgres('concurrent writers on two apps: a reader walking meanwhile sees every event exactly once', async () => {
    const auth = await t.newKey({ organization: 'feed-concurrent' });
    const other = t.anotherApp();
    const writers = Array.from({ length: 6 }, (_, w) => (async () => {
      const http = w % 2 ? other.http : t.http;
      for (let i = 0; i < 10; i++) await http.post('/v1/checkins').set('Authorization', auth).send({ userId: `auth0|w${w}-${i}`, siteId: 's' }).expect(201);
    })());
    const seen: string[] = [];
    let after: string | undefined;
    let writing = true;
    const done = Promise.all(writers).finally(() => { writing = false; });
    while (writing) {
      const page = await feed(auth, `?limit=3${after ? `&after=${after}` : ''}`);
      seen.push(...page.data.map((e: any) => e.id));
      after = page.nextCursor;
    }
    await done;
    for (;;) {
      const page = await feed(auth, `?limit=100${after ? `&after=${after}` : ''}`);
      if (!page.data.length) break;
      seen.push(...page.data.map((e: any) => e.id));
      after = page.nextCursor;
    }
    const all = (await feed(auth, '?limit=500')).data.map((e: any) => e.id);
    expect(all).toHaveLength(60);
    expect(seen).toEqual(all);
  });
});
