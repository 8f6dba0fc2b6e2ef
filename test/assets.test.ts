import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';
import { newSite } from './support/resources';

describeEachDatabase('assets', (t) => {
  /** An asset with every field, at a site of the organization. */
  const aTransformer = async () => ({
    name: 'Transformer T1',
    siteId: (await newSite(t)).id,
    assetType: 'transformer',
    serialNumber: 'TX-2231-0042',
    attributes: { manufacturer: 'Hitachi', ratingKva: '500' },
  });

  describe('createAsset', () => {
    it('creates an asset and answers 201 with Location', async () => {
      const transformer = await aTransformer();
      const res = await t.http.post('/v1/assets').set('Authorization', t.auth).set('Idempotency-Key', 'create-t1').send(transformer).expect(201);
      expect(res.body).toEqual({ id: anId('ast'), ...transformer, status: 'active', createdAt: aTimestamp(), updatedAt: res.body.createdAt });
      expect(res.headers.location).toBe(`/v1/assets/${res.body.id}`);
      const stored = await t.db.knex('assets').where({ id: res.body.id }).first();
      expect(stored).toMatchObject({ name: 'Transformer T1', site_id: transformer.siteId, status: 'active', deleted_at: null });
      expect(JSON.parse(stored.attributes)).toEqual(transformer.attributes);
    });

    it('fills in defaults and nulls', async () => {
      const res = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'Fire door B2' }).expect(201);
      expect(res.body).toEqual({
        id: anId('ast'), name: 'Fire door B2', siteId: null, assetType: null, serialNumber: null, status: 'active', attributes: {},
        createdAt: aTimestamp(), updatedAt: aTimestamp(),
      });
    });

    it('rejects a missing name, an unknown status, unknown fields and non-string attributes', async () => {
      const noName = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ assetType: 'pump' }).expect(400);
      expect(noName.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/name', message: 'is required' }] }));
      const status = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', status: 'broken' }).expect(400);
      expect(status.body.details).toEqual([{ path: '/status', message: 'must be one of "active", "inactive", "retired"' }]);
      const typo = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', serial: '1' }).expect(400);
      expect(typo.body.details).toEqual([{ path: '/serial', message: 'is not a known field' }]);
      const nested = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', attributes: { rating: 500, nested: { a: 'b' } } }).expect(400);
      expect(nested.body).toEqual(anError('VALIDATION_ERROR', { details: [
        { path: '/attributes/rating', message: 'must be string' },
        { path: '/attributes/nested', message: 'must be string' },
      ] }));
      expect(await t.db.knex('assets').where({ name: 'X' })).toHaveLength(0);
    });

    it('caps the attributes: at most 50 keys, keys up to 64 characters, values up to 500', async () => {
      const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
      const tooMany = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', attributes: many }).expect(400);
      expect(tooMany.body.details).toEqual([{ path: '/attributes', message: 'must NOT have more than 50 properties' }]);
      const longKey = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', attributes: { ['k'.repeat(65)]: 'v' } }).expect(400);
      expect(longKey.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: `/attributes/${'k'.repeat(65)}`, message: 'key must NOT have more than 64 characters' }] }));
      const badKey = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', attributes: { 'has space': 'v' } }).expect(400);
      expect(badKey.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/attributes/has space', message: expect.stringMatching(/^key must match pattern/) }] }));
      const longValue = await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'X', attributes: { k: 'v'.repeat(501) } }).expect(400);
      expect(longValue.body.details).toEqual([{ path: '/attributes/k', message: 'must NOT have more than 500 characters' }]);
      const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'.repeat(500)]));
      await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'Y', attributes: fifty }).expect(201);
    });

    it('needs the assets:write scope', async () => {
      const readOnly = await t.newKey({ scopes: ['assets:read'] });
      const res = await t.http.post('/v1/assets').set('Authorization', readOnly).send({ name: 'X' }).expect(403);
      expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
      expect(res.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="assets:write"');
    });
  });

  describe('getAsset / updateAsset', () => {
    it('reads, changes, clears and replaces attributes', async () => {
      const created = (await t.http.post('/v1/assets').set('Authorization', t.auth).send(await aTransformer()).expect(201)).body;
      expect((await t.http.get(`/v1/assets/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(created);

      const updated = await t.http.patch(`/v1/assets/${created.id}`).set('Authorization', t.auth).set('Idempotency-Key', 'retire-t1')
        .send({ status: 'retired', serialNumber: null, attributes: { decommissionedBy: 'ops' } }).expect(200);
      expect(updated.body).toEqual({ ...created, status: 'retired', serialNumber: null, attributes: { decommissionedBy: 'ops' }, updatedAt: aTimestamp() });
      expect((await t.http.get(`/v1/assets/${created.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(updated.body);
      const stored = await t.db.knex('assets').where({ id: created.id }).first();
      expect(stored).toMatchObject({ status: 'retired', serial_number: null, attributes: '{"decommissionedBy":"ops"}' });
    });

    it('answers 404 for an unknown id and 400 for an empty or unknown-field update', async () => {
      const missing = await t.http.get('/v1/assets/ast_000000000000000000000000').set('Authorization', t.auth).expect(404);
      expect(missing.body).toEqual(anError('NOT_FOUND'));
      await t.http.patch('/v1/assets/ast_000000000000000000000000').set('Authorization', t.auth).send({ name: 'Z' }).expect(404);
      const created = (await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'Pump' }).expect(201)).body;
      const empty = await t.http.patch(`/v1/assets/${created.id}`).set('Authorization', t.auth).send({}).expect(400);
      expect(empty.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '', message: 'must NOT have fewer than 1 properties' }] }));
      const id = await t.http.patch(`/v1/assets/${created.id}`).set('Authorization', t.auth).send({ id: 'ast_other' }).expect(400);
      expect(id.body.details).toEqual([{ path: '/id', message: 'is not a known field' }]);
    });
  });

  describe('deleteAsset', () => {
    it('follows the delete rules: 204, replay 204 with Idempotent-Replayed, 404 without the key; keeps a tombstone', async () => {
      const created = (await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'Old boiler' }).expect(201)).body;

      const first = await t.http.delete(`/v1/assets/${created.id}`).set('Authorization', t.auth).set('Idempotency-Key', 'del-boiler').expect(204);
      expect(first.body).toEqual({});
      expect(first.headers['idempotent-replayed']).toBeUndefined();

      const replay = await t.http.delete(`/v1/assets/${created.id}`).set('Authorization', t.auth).set('Idempotency-Key', 'del-boiler').expect(204);
      expect(replay.headers['idempotent-replayed']).toBe('true');

      const withoutKey = await t.http.delete(`/v1/assets/${created.id}`).set('Authorization', t.auth).expect(404);
      expect(withoutKey.body).toEqual(anError('NOT_FOUND'));

      await t.http.get(`/v1/assets/${created.id}`).set('Authorization', t.auth).expect(404);
      await t.http.patch(`/v1/assets/${created.id}`).set('Authorization', t.auth).send({ name: 'Revived' }).expect(404);
      const list = await t.http.get('/v1/assets?limit=500').set('Authorization', t.auth).expect(200);
      expect(list.body.data.map((a: { id: string }) => a.id)).not.toContain(created.id);

      const tombstone = await t.db.knex('assets').where({ id: created.id }).first();
      expect(tombstone).toMatchObject({ name: 'Old boiler', deleted_at: aTimestamp() });
    });

    it('answers 404 for an id that never existed', async () => {
      const res = await t.http.delete('/v1/assets/ast_000000000000000000000000').set('Authorization', t.auth).set('Idempotency-Key', 'del-none').expect(404);
      expect(res.body).toEqual(anError('NOT_FOUND'));
    });
  });

  describe('listAssets', () => {
    it('filters by siteId, assetType and status', async () => {
      const auth = await t.newKey({ organization: 'filter-assets' });
      const make = async (body: object) => (await t.http.post('/v1/assets').set('Authorization', auth).send(body).expect(201)).body;
      const [siteA, siteB, siteZ] = [await newSite(t, auth), await newSite(t, auth), await newSite(t, auth)];
      const pumpA = await make({ name: 'Pump A', siteId: siteA.id, assetType: 'pump' });
      const pumpB = await make({ name: 'Pump B', siteId: siteB.id, assetType: 'pump', status: 'inactive' });
      const doorA = await make({ name: 'Door A', siteId: siteA.id, assetType: 'door' });
      const names = async (qs: string) => (await t.http.get(`/v1/assets?${qs}`).set('Authorization', auth).expect(200)).body.data.map((a: { name: string }) => a.name);
      expect(await names(`siteId=${siteA.id}`)).toEqual([pumpA.name, doorA.name]);
      expect(await names('assetType=pump')).toEqual([pumpA.name, pumpB.name]);
      expect(await names(`siteId=${siteA.id}&assetType=pump`)).toEqual([pumpA.name]);
      expect(await names('status=inactive')).toEqual([pumpB.name]);
      expect(await names(`siteId=${siteZ.id}`)).toEqual([]);
      const all = await t.http.get('/v1/assets').set('Authorization', auth).expect(200);
      expect(all.body).toEqual({ data: [pumpA, pumpB, doorA], nextCursor: null });
      const bad = await t.http.get('/v1/assets?status=gone').set('Authorization', auth).expect(400);
      expect(bad.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/status', message: 'must be one of "active", "inactive", "retired"' }] }));
    });

    it('pages through every asset exactly once, oldest first, while assets are added and deleted', async () => {
      const auth = await t.newKey({ organization: 'paging-assets' });
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) ids.push((await t.http.post('/v1/assets').set('Authorization', auth).send({ name: `asset ${i}` }).expect(201)).body.id);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const url: string = `/v1/assets?limit=3${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await t.http.get(url).set('Authorization', auth).expect(200);
        seen.push(...res.body.data.map((a: { name: string }) => a.name));
        cursor = res.body.nextCursor;
        if (pages++ === 0) {
          await t.http.post('/v1/assets').set('Authorization', auth).send({ name: 'added while paging' }).expect(201);
          await t.http.delete(`/v1/assets/${ids[5]}`).set('Authorization', auth).expect(204);
        }
      } while (cursor);
      expect(seen).toEqual(['asset 0', 'asset 1', 'asset 2', 'asset 3', 'asset 4', 'asset 6', 'added while paging']);
      expect(pages).toBe(3);
    });

    it('rejects a malformed cursor', async () => {
      const res = await t.http.get('/v1/assets?cursor=nope').set('Authorization', t.auth).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: expect.any(String) }] }));
    });
  });

  describe('tenancy', () => {
    it("never shows, changes or deletes another organization's asset", async () => {
      const other = await t.newKey({ organization: 'other-org-assets' });
      const site = await newSite(t);
      const mine = (await t.http.post('/v1/assets').set('Authorization', t.auth).send({ name: 'Mine', siteId: site.id }).expect(201)).body;
      await t.http.get(`/v1/assets/${mine.id}`).set('Authorization', other).expect(404);
      await t.http.patch(`/v1/assets/${mine.id}`).set('Authorization', other).send({ name: 'Stolen' }).expect(404);
      await t.http.delete(`/v1/assets/${mine.id}`).set('Authorization', other).expect(404);
      const list = await t.http.get(`/v1/assets?siteId=${site.id}`).set('Authorization', other).expect(200);
      expect(list.body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get(`/v1/assets/${mine.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(mine);
      expect(await t.db.knex('assets').where({ id: mine.id }).first()).toMatchObject({ name: 'Mine', deleted_at: null });
    });
  });
});
