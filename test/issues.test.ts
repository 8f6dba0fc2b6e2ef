import { describeEachDatabase, anId, aTimestamp, anError } from './support/testApp';
import { newAsset, newRun, newSite } from './support/resources';

describeEachDatabase('issues', (t) => {
  /** An issue with every reference, each naming a resource of the organization. */
  const aLeak = async (auth = t.auth) => {
    const site = await newSite(t, auth);
    const asset = await newAsset(t, auth, { name: 'Transformer T1', siteId: site.id });
    const run = await newRun(t, auth, site.id);
    return {
      title: 'Oil leak under transformer T1',
      description: 'Drip tray half full; gasket looks perished.',
      priority: 'high',
      siteId: site.id,
      assetId: asset.id,
      runId: run.id,
      assigneeUserId: 'user-123',
    };
  };
  const create = async (body: object, auth = t.auth) => (await t.http.post('/v1/issues').set('Authorization', auth).send(body).expect(201)).body;
  const patch = async (id: string, body: object) => (await t.http.patch(`/v1/issues/${id}`).set('Authorization', t.auth).send(body).expect(200)).body;

  describe('createIssue', () => {
    it('raises an issue with every field and answers 201 with Location', async () => {
      const leak = await aLeak();
      const res = await t.http.post('/v1/issues').set('Authorization', t.auth).set('Idempotency-Key', 'raise-leak')
        .send({ ...leak, status: 'open', dueAt: '2026-11-29T18:00:00+01:00' }).expect(201);
      expect(res.body).toEqual({
        id: anId('iss'), ...leak, status: 'open', dueAt: '2026-11-29T17:00:00.000Z', resolvedAt: null, closedAt: null,
        createdAt: aTimestamp(), updatedAt: res.body.createdAt,
      });
      expect(res.headers.location).toBe(`/v1/issues/${res.body.id}`);
      const stored = await t.db.knex('issues').where({ id: res.body.id }).first();
      expect(stored).toMatchObject({ title: leak.title, status: 'open', priority: 'high', run_id: leak.runId, due_at: '2026-11-29T17:00:00.000Z' });
    });

    it('defaults status to open and priority to medium', async () => {
      const issue = await create({ title: 'Broken handrail' });
      expect(issue).toEqual({
        id: anId('iss'), title: 'Broken handrail', description: null, status: 'open', priority: 'medium',
        siteId: null, assetId: null, runId: null, assigneeUserId: null, dueAt: null, resolvedAt: null, closedAt: null,
        createdAt: aTimestamp(), updatedAt: aTimestamp(),
      });
    });

    it('stamps resolvedAt / closedAt when created already resolved or closed', async () => {
      const resolved = await create({ title: 'Fixed on the spot', status: 'resolved' });
      expect(resolved).toMatchObject({ status: 'resolved', resolvedAt: resolved.createdAt, closedAt: null });
      const closed = await create({ title: 'Duplicate report', status: 'closed' });
      expect(closed).toMatchObject({ status: 'closed', resolvedAt: null, closedAt: closed.createdAt });
    });

    it('rejects a missing title, unknown status or priority, a bad dueAt and unknown fields', async () => {
      const noTitle = await t.http.post('/v1/issues').set('Authorization', t.auth).send({ status: 'open' }).expect(400);
      expect(noTitle.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/title', message: 'is required' }] }));
      const status = await t.http.post('/v1/issues').set('Authorization', t.auth).send({ title: 'X', status: 'done' }).expect(400);
      expect(status.body.details).toEqual([{ path: '/status', message: 'must be one of "open", "in_progress", "resolved", "closed"' }]);
      const priority = await t.http.post('/v1/issues').set('Authorization', t.auth).send({ title: 'X', priority: 'urgent' }).expect(400);
      expect(priority.body.details).toEqual([{ path: '/priority', message: 'must be one of "low", "medium", "high", "critical"' }]);
      const due = await t.http.post('/v1/issues').set('Authorization', t.auth).send({ title: 'X', dueAt: 'tomorrow' }).expect(400);
      expect(due.body.details).toEqual([{ path: '/dueAt', message: expect.stringContaining('RFC 3339') }]);
      const typo = await t.http.post('/v1/issues').set('Authorization', t.auth).send({ title: 'X', assignee: 'u' }).expect(400);
      expect(typo.body.details).toEqual([{ path: '/assignee', message: 'is not a known field' }]);
      const resolvedAt = await t.http.post('/v1/issues').set('Authorization', t.auth).send({ title: 'X', resolvedAt: '2026-11-22T00:00:00Z' }).expect(400);
      expect(resolvedAt.body.details).toEqual([{ path: '/resolvedAt', message: 'is not a known field' }]);
      expect(await t.db.knex('issues').where({ title: 'X' })).toHaveLength(0);
    });

    it('replays a retried create instead of raising the issue twice', async () => {
      const auth = await t.newKey({ organization: 'replay-issues' });
      const first = await t.http.post('/v1/issues').set('Authorization', auth).set('Idempotency-Key', 'once').send({ title: 'Once' }).expect(201);
      const again = await t.http.post('/v1/issues').set('Authorization', auth).set('Idempotency-Key', 'once').send({ title: 'Once' }).expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect((await t.http.get('/v1/issues').set('Authorization', auth).expect(200)).body.data).toHaveLength(1);
    });
  });

  describe('updateIssue and the status timestamps', () => {
    it('resolves, closes and reopens, keeping resolvedAt / closedAt in step', async () => {
      const issue = await create(await aLeak());

      const working = await patch(issue.id, { status: 'in_progress', assigneeUserId: 'user-456' });
      expect(working).toEqual({ ...issue, status: 'in_progress', assigneeUserId: 'user-456', updatedAt: aTimestamp() });

      const resolved = await patch(issue.id, { status: 'resolved' });
      expect(resolved).toEqual({ ...working, status: 'resolved', resolvedAt: aTimestamp(), updatedAt: resolved.resolvedAt });

      // re-sending the current status does not move the clock
      const again = await patch(issue.id, { status: 'resolved', description: 'New gasket fitted.' });
      expect(again).toEqual({ ...resolved, description: 'New gasket fitted.', updatedAt: aTimestamp() });
      expect(again.resolvedAt).toBe(resolved.resolvedAt);

      const closed = await patch(issue.id, { status: 'closed' });
      expect(closed).toEqual({ ...again, status: 'closed', resolvedAt: resolved.resolvedAt, closedAt: aTimestamp(), updatedAt: closed.closedAt });

      const reopened = await patch(issue.id, { status: 'open' });
      expect(reopened).toEqual({ ...closed, status: 'open', resolvedAt: null, closedAt: null, updatedAt: aTimestamp() });

      expect((await t.http.get(`/v1/issues/${issue.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(reopened);
      expect(await t.db.knex('issues').where({ id: issue.id }).first()).toMatchObject({ status: 'open', resolved_at: null, closed_at: null });
    });

    it('closing without resolving leaves resolvedAt null; a closed issue reopened to resolved drops closedAt', async () => {
      const issue = await create({ title: 'Reported twice' });
      const closed = await patch(issue.id, { status: 'closed' });
      expect(closed).toMatchObject({ status: 'closed', resolvedAt: null, closedAt: aTimestamp() });
      const resolved = await patch(issue.id, { status: 'resolved' });
      expect(resolved).toMatchObject({ status: 'resolved', resolvedAt: aTimestamp(), closedAt: null });
      const inProgress = await patch(issue.id, { status: 'in_progress' });
      expect(inProgress).toMatchObject({ status: 'in_progress', resolvedAt: null, closedAt: null });
    });

    it('clears optional fields with null and normalizes dueAt', async () => {
      const issue = await create(await aLeak());
      const updated = await patch(issue.id, { description: null, assetId: null, runId: null, dueAt: '2026-12-01T09:30:00-05:00', priority: 'critical', title: 'Oil leak (urgent)' });
      expect(updated).toEqual({
        ...issue, title: 'Oil leak (urgent)', description: null, assetId: null, runId: null, priority: 'critical',
        dueAt: '2026-12-01T14:30:00.000Z', updatedAt: aTimestamp(),
      });
      const cleared = await patch(issue.id, { dueAt: null });
      expect(cleared.dueAt).toBeNull();
    });

    it('answers 404 for an unknown id and 400 for an empty update or a server-kept field', async () => {
      const missing = await t.http.patch('/v1/issues/iss_000000000000000000000000').set('Authorization', t.auth).send({ status: 'closed' }).expect(404);
      expect(missing.body).toEqual(anError('NOT_FOUND'));
      await t.http.get('/v1/issues/iss_000000000000000000000000').set('Authorization', t.auth).expect(404);
      const issue = await create({ title: 'Y' });
      await t.http.patch(`/v1/issues/${issue.id}`).set('Authorization', t.auth).send({}).expect(400);
      const stamp = await t.http.patch(`/v1/issues/${issue.id}`).set('Authorization', t.auth).send({ closedAt: '2026-11-22T00:00:00Z' }).expect(400);
      expect(stamp.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/closedAt', message: 'is not a known field' }] }));
      const title = await t.http.patch(`/v1/issues/${issue.id}`).set('Authorization', t.auth).send({ title: null }).expect(400);
      expect(title.body.code).toBe('VALIDATION_ERROR');
    });

    it('needs the issues:write scope to update and issues:read to read', async () => {
      const issue = await create({ title: 'Scoped' });
      const readOnly = await t.newKey({ scopes: ['issues:read'] });
      await t.http.get(`/v1/issues/${issue.id}`).set('Authorization', readOnly).expect(200);
      const denied = await t.http.patch(`/v1/issues/${issue.id}`).set('Authorization', readOnly).send({ status: 'closed' }).expect(403);
      expect(denied.body).toEqual(anError('INSUFFICIENT_SCOPE'));
      const assetsOnly = await t.newKey({ scopes: ['assets:read'] });
      await t.http.get('/v1/issues').set('Authorization', assetsOnly).expect(403);
    });
  });

  describe('listIssues', () => {
    it('filters by status, priority, siteId, assetId, runId and assigneeUserId', async () => {
      const auth = await t.newKey({ organization: 'filter-issues' });
      const [site1, site2] = [await newSite(t, auth), await newSite(t, auth)];
      const asset1 = await newAsset(t, auth);
      const run1 = await newRun(t, auth, site1.id);
      const a = await create({ title: 'A', priority: 'high', siteId: site1.id, assetId: asset1.id, runId: run1.id, assigneeUserId: 'u1' }, auth);
      const b = await create({ title: 'B', status: 'in_progress', siteId: site1.id, assigneeUserId: 'u2' }, auth);
      const c = await create({ title: 'C', status: 'resolved', priority: 'high', siteId: site2.id, assetId: asset1.id }, auth);
      const titles = async (qs: string) => (await t.http.get(`/v1/issues?${qs}`).set('Authorization', auth).expect(200)).body.data.map((i: { title: string }) => i.title);
      expect(await titles('status=open')).toEqual(['A']);
      expect(await titles('status=resolved')).toEqual(['C']);
      expect(await titles('priority=high')).toEqual(['A', 'C']);
      expect(await titles(`siteId=${site1.id}`)).toEqual(['A', 'B']);
      expect(await titles(`assetId=${asset1.id}`)).toEqual(['A', 'C']);
      expect(await titles(`runId=${run1.id}`)).toEqual(['A']);
      expect(await titles('assigneeUserId=u2')).toEqual(['B']);
      expect(await titles(`priority=high&siteId=${site2.id}`)).toEqual(['C']);
      expect(await titles('status=closed')).toEqual([]);
      expect((await t.http.get('/v1/issues').set('Authorization', auth).expect(200)).body).toEqual({ data: [a, b, c], nextCursor: null });
      const bad = await t.http.get('/v1/issues?priority=urgent').set('Authorization', auth).expect(400);
      expect(bad.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/priority', message: 'must be one of "low", "medium", "high", "critical"' }] }));
    });

    it('pages through every issue exactly once, oldest first, with a filter, while issues are added', async () => {
      const auth = await t.newKey({ organization: 'paging-issues' });
      for (let i = 0; i < 8; i++) await create({ title: `issue ${i}`, priority: i % 2 ? 'low' : 'high' }, auth);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const url: string = `/v1/issues?priority=high&limit=2${cursor ? `&cursor=${cursor}` : ''}`;
        const res = await t.http.get(url).set('Authorization', auth).expect(200);
        seen.push(...res.body.data.map((i: { title: string }) => i.title));
        cursor = res.body.nextCursor;
        if (pages++ === 0) await create({ title: 'added while paging', priority: 'high' }, auth);
      } while (cursor);
      expect(seen).toEqual(['issue 0', 'issue 2', 'issue 4', 'issue 6', 'added while paging']);
    });
  });

  describe('tenancy', () => {
    it("never shows or changes another organization's issue", async () => {
      const other = await t.newKey({ organization: 'other-org-issues' });
      const site = await newSite(t);
      const mine = await create({ title: 'Mine', siteId: site.id });
      await t.http.get(`/v1/issues/${mine.id}`).set('Authorization', other).expect(404);
      await t.http.patch(`/v1/issues/${mine.id}`).set('Authorization', other).send({ status: 'closed' }).expect(404);
      const list = await t.http.get(`/v1/issues?siteId=${site.id}`).set('Authorization', other).expect(200);
      expect(list.body).toEqual({ data: [], nextCursor: null });
      expect((await t.http.get(`/v1/issues/${mine.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(mine);
    });
  });
});
