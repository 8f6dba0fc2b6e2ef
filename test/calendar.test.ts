import { describeEachDatabase, anId, aTimestamp, anError, TestContext } from './support/testApp';
import { newSite } from './support/resources';

const checklist = { name: 'Weekly walk-round', items: [{ id: 'fence-intact', label: 'Perimeter fence intact', type: 'yes_no', required: true }] };

async function newTemplate(t: TestContext, auth = t.auth) {
  return (await t.http.post('/v1/templates').set('Authorization', auth).send(checklist).expect(201)).body;
}

async function newSchedule(t: TestContext, body: object, auth = t.auth) {
  return (await t.http.post('/v1/schedules').set('Authorization', auth).send(body).expect(201)).body;
}

const weeklyLondon = (templateId: string, siteId: string) => ({
  templateId, siteId, assigneeUserId: 'user-42', timezone: 'Europe/London',
  startsAt: '2026-03-16T09:00:00', durationMinutes: 60, recurrence: 'FREQ=WEEKLY;BYDAY=MO',
});

/** Every occurrence of a query, walking all pages. */
async function allOccurrences(t: TestContext, query: string, auth = t.auth, limit = 500) {
  const seen: Record<string, unknown>[] = [];
  let cursor: string | null = null;
  do {
    const url: string = `/v1/calendar/occurrences?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`;
    const res = await t.http.get(url).set('Authorization', auth).expect(200);
    seen.push(...res.body.data);
    cursor = res.body.nextCursor;
  } while (cursor);
  return seen;
}

describeEachDatabase('calendar', (t) => {
  describe('schedules', () => {
    it('creates a schedule with defaults and a normalized recurrence', async () => {
      const template = await newTemplate(t);
      const site = await newSite(t);
      const res = await t.http.post('/v1/schedules').set('Authorization', t.auth)
        .send({ templateId: template.id, siteId: site.id, timezone: 'America/New_York', startsAt: '2026-01-05T07:30:00', recurrence: 'rrule:freq=daily;interval=2;count=10' }).expect(201);
      expect(res.body).toEqual({
        id: anId('sch'), templateId: template.id, siteId: site.id, assigneeUserId: null, timezone: 'America/New_York',
        startsAt: '2026-01-05T07:30:00', startsAtUtc: '2026-01-05T12:30:00.000Z', durationMinutes: 60, recurrence: 'FREQ=DAILY;INTERVAL=2;COUNT=10', createdAt: aTimestamp(), updatedAt: res.body.createdAt,
      });
      expect(res.headers.location).toBe(`/v1/schedules/${res.body.id}`);
      expect(await t.db.knex('schedules').where({ id: res.body.id }).first()).toMatchObject({ starts_at: '2026-01-05T07:30:00', timezone: 'America/New_York', recurrence: 'FREQ=DAILY;INTERVAL=2;COUNT=10' });
      expect((await t.http.get(`/v1/schedules/${res.body.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(res.body);
    });

    it('stores the time zone in its usual letter case, and evaluates the schedule in it', async () => {
      const template = await newTemplate(t);
      const site = await newSite(t);
      const res = await t.http.post('/v1/schedules').set('Authorization', t.auth)
        .send({ templateId: template.id, siteId: site.id, timezone: 'AMERICA/NEW_YORK', startsAt: '2026-01-05T07:30:00' }).expect(201);
      expect(res.body).toMatchObject({ timezone: 'America/New_York', startsAtUtc: '2026-01-05T12:30:00.000Z' });
      const changed = await t.http.patch(`/v1/schedules/${res.body.id}`).set('Authorization', t.auth).send({ timezone: 'EUROPE/LONDON' }).expect(200);
      expect(changed.body.timezone).toBe('Europe/London');
      expect(await t.db.knex('schedules').where({ id: res.body.id }).first('timezone')).toEqual({ timezone: 'Europe/London' });
    });

    it.each([
      [{ timezone: 'Mars/Olympus' }, '/timezone', expect.stringContaining('IANA')],
      [{ startsAt: '2026-02-30T09:00:00' }, '/startsAt', expect.stringContaining('must be a local date and time')],
      [{ startsAt: '2026-03-16T09:00' }, '/startsAt', expect.stringContaining('must match pattern')],
      [{ recurrence: 'FREQ=YEARLY' }, '/recurrence', 'FREQ must be DAILY, WEEKLY or MONTHLY (got YEARLY)'],
      [{ recurrence: 'FREQ=WEEKLY;BYSETPOS=1' }, '/recurrence', 'BYSETPOS is not supported: use only FREQ, INTERVAL, BYDAY, COUNT, UNTIL'],
      [{ templateId: 'tpl_missing' }, '/templateId', expect.stringContaining('does not name a template')],
      [{ durationMinutes: 0 }, '/durationMinutes', 'must be >= 1'],
    ])('refuses %j with 400 naming the field', async (change, path, message) => {
      const template = await newTemplate(t);
      const site = await newSite(t);
      const res = await t.http.post('/v1/schedules').set('Authorization', t.auth).send({ ...weeklyLondon(template.id, site.id), ...change }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path, message }] }));
    });

    it('updates fields, clears assignee and recurrence, validates like create, and deletes', async () => {
      const template = await newTemplate(t);
      const created = await newSchedule(t, weeklyLondon(template.id, (await newSite(t)).id));
      const updated = await t.http.patch(`/v1/schedules/${created.id}`).set('Authorization', t.auth)
        .send({ assigneeUserId: null, durationMinutes: 90, recurrence: 'FREQ=MONTHLY;BYDAY=1MO' }).expect(200);
      expect(updated.body).toEqual({ ...created, assigneeUserId: null, durationMinutes: 90, recurrence: 'FREQ=MONTHLY;BYDAY=1MO', updatedAt: aTimestamp() });
      const once = await t.http.patch(`/v1/schedules/${created.id}`).set('Authorization', t.auth).send({ recurrence: null }).expect(200);
      expect(once.body.recurrence).toBeNull();

      const bad = await t.http.patch(`/v1/schedules/${created.id}`).set('Authorization', t.auth).send({ recurrence: 'FREQ=DAILY;COUNT=2;UNTIL=20270101' }).expect(400);
      expect(bad.body.details).toEqual([{ path: '/recurrence', message: 'COUNT and UNTIL must not both be given (RFC 5545)' }]);
      await t.http.patch(`/v1/schedules/${created.id}`).set('Authorization', t.auth).send({ templateId: 'tpl_missing' }).expect(400);
      await t.http.patch(`/v1/schedules/${created.id}`).set('Authorization', t.auth).send({}).expect(400);

      await t.http.delete(`/v1/schedules/${created.id}`).set('Authorization', t.auth).expect(204);
      expect((await t.http.get(`/v1/schedules/${created.id}`).set('Authorization', t.auth).expect(404)).body).toEqual(anError('NOT_FOUND'));
      await t.http.patch(`/v1/schedules/${created.id}`).set('Authorization', t.auth).send({ durationMinutes: 5 }).expect(404);
      await t.http.delete(`/v1/schedules/${created.id}`).set('Authorization', t.auth).expect(404);
      expect(await allOccurrences(t, `from=2026-01-01T00:00:00Z&to=2026-12-31T00:00:00Z&scheduleId=${created.id}`)).toEqual([]);
    });

    it('refuses a recurrence that never occurs; one stored before that check lists nothing and takes other changes', async () => {
      const template = await newTemplate(t);
      const site = await newSite(t);
      // 2026-03-18 is a Wednesday: every 14 days from it is a Wednesday, never a Monday
      const never = { ...weeklyLondon(template.id, site.id), startsAt: '2026-03-18T09:00:00', recurrence: 'FREQ=DAILY;INTERVAL=14;BYDAY=MO' };
      const refused = await t.http.post('/v1/schedules').set('Authorization', t.auth).send(never).expect(400);
      expect(refused.body.details).toEqual([{ path: '/recurrence', message: 'never occurs: with FREQ=DAILY and INTERVAL=14 every occurrence falls on the weekday of startsAt (WE), which BYDAY does not list' }]);
      const mixed = await t.http.post('/v1/schedules').set('Authorization', t.auth).send({ ...never, recurrence: 'FREQ=MONTHLY;BYDAY=1MO,FR' }).expect(400);
      expect(mixed.body.details).toEqual([{ path: '/recurrence', message: 'BYDAY with FREQ=MONTHLY must list either ordinal weekdays (1MO, -1FR) or plain weekdays (MO, FR), not both' }]);

      // the same rule from a Monday occurs; moving its start to a Wednesday is refused
      const fortnightly = await newSchedule(t, { ...never, startsAt: '2026-03-16T09:00:00' });
      expect((await allOccurrences(t, `from=2026-03-01T00:00:00Z&to=2026-04-15T00:00:00Z&scheduleId=${fortnightly.id}`)).map((o) => o.localStartAt))
        .toEqual(['2026-03-16T09:00:00', '2026-03-30T09:00:00', '2026-04-13T09:00:00']);
      const moved = await t.http.patch(`/v1/schedules/${fortnightly.id}`).set('Authorization', t.auth).send({ startsAt: '2026-03-18T09:00:00' }).expect(400);
      expect(moved.body.details[0].path).toBe('/startsAt');
      // no occurrence before the end of 2200: an UNTIL before the start
      const ended = await t.http.post('/v1/schedules').set('Authorization', t.auth).send({ ...never, startsAt: '2026-03-16T09:00:00', recurrence: 'FREQ=DAILY;UNTIL=20200101' }).expect(400);
      expect(ended.body.details).toEqual([{ path: '/recurrence', message: 'never occurs: the rule has no occurrence from startsAt to the end of 2200' }]);
      // a fifth Monday of every fourth February from a year that is not a leap year: 28 days each
      const fifth = await t.http.post('/v1/schedules').set('Authorization', t.auth).send({ ...never, startsAt: '2026-02-02T09:00:00', recurrence: 'FREQ=MONTHLY;INTERVAL=48;BYDAY=5MO' }).expect(400);
      expect(fifth.body.details).toEqual([{ path: '/recurrence', message: 'never occurs: none of the months the rule visits (every 48 from the month of startsAt) has five of the weekdays BYDAY names' }]);

      // a schedule stored with such a rule before the check: no occurrences, and other fields still change
      await t.db.knex('schedules').where({ id: fortnightly.id }).update({ recurrence: 'FREQ=MONTHLY;BYDAY=1MO,FR' });
      expect(await allOccurrences(t, `from=2026-01-01T00:00:00Z&to=2026-12-31T00:00:00Z&scheduleId=${fortnightly.id}`)).toEqual([]);
      const renamed = await t.http.patch(`/v1/schedules/${fortnightly.id}`).set('Authorization', t.auth).send({ durationMinutes: 30 }).expect(200);
      expect(renamed.body).toMatchObject({ durationMinutes: 30, recurrence: 'FREQ=MONTHLY;BYDAY=1MO,FR' });
      // and one of fifth Mondays in Februaries that have 28 days (2026, 2030, …)
      await t.db.knex('schedules').where({ id: fortnightly.id }).update({ starts_at: '2026-02-02T09:00:00', recurrence: 'FREQ=MONTHLY;INTERVAL=48;BYDAY=5MO' });
      expect(await allOccurrences(t, `from=2026-01-01T00:00:00Z&to=2026-12-31T00:00:00Z&scheduleId=${fortnightly.id}`)).toEqual([]);
    });

    it('lists schedules with filters and pages', async () => {
      const auth = await t.newKey({ organization: 'paging-schedules' });
      const template = await newTemplate(t, auth);
      const [siteA, siteB] = [await newSite(t, auth), await newSite(t, auth)];
      const a = await newSchedule(t, weeklyLondon(template.id, siteA.id), auth);
      const b = await newSchedule(t, { ...weeklyLondon(template.id, siteB.id), assigneeUserId: 'ann' }, auth);
      const c = await newSchedule(t, { ...weeklyLondon(template.id, siteA.id), assigneeUserId: 'ann' }, auth);
      const ids = async (q: string) => (await t.http.get(`/v1/schedules${q}`).set('Authorization', auth).expect(200)).body.data.map((s: { id: string }) => s.id);
      expect(await ids('')).toEqual([a.id, b.id, c.id]);
      expect(await ids(`?siteId=${siteA.id}`)).toEqual([a.id, c.id]);
      expect(await ids(`?assigneeUserId=ann&siteId=${siteB.id}`)).toEqual([b.id]);
      expect(await ids(`?templateId=${template.id}&limit=1`)).toEqual([a.id]);
      const page1 = await t.http.get('/v1/schedules?limit=2').set('Authorization', auth).expect(200);
      const page2 = await t.http.get(`/v1/schedules?limit=2&cursor=${page1.body.nextCursor}`).set('Authorization', auth).expect(200);
      expect(page2.body).toEqual({ data: [c], nextCursor: null });
    });
  });

  describe('listCalendarOccurrences', () => {
    it('keeps a weekly Monday 09:00 London schedule at 09:00 local across the March change; UTC moves an hour', async () => {
      const auth = await t.newKey({ organization: 'calendar-dst' });
      const template = await newTemplate(t, auth);
      const site = await newSite(t, auth);
      const schedule = await newSchedule(t, weeklyLondon(template.id, site.id), auth);
      const res = await t.http.get('/v1/calendar/occurrences?from=2026-03-20T00:00:00Z&to=2026-04-07T00:00:00Z').set('Authorization', auth).expect(200);
      const occurrence = (startAt: string, endAt: string, localStartAt: string, stamp: string) => ({
        id: `occ_${schedule.id.slice(4)}_${stamp}`, scheduleId: schedule.id, templateId: template.id, siteId: site.id, assigneeUserId: 'user-42',
        startAt, endAt, localStartAt, timezone: 'Europe/London', runId: null, runStatus: null,
      });
      expect(res.body).toEqual({
        data: [
          occurrence('2026-03-23T09:00:00.000Z', '2026-03-23T10:00:00.000Z', '2026-03-23T09:00:00', '20260323T090000Z'),
          occurrence('2026-03-30T08:00:00.000Z', '2026-03-30T09:00:00.000Z', '2026-03-30T09:00:00', '20260330T080000Z'),
          occurrence('2026-04-06T08:00:00.000Z', '2026-04-06T09:00:00.000Z', '2026-04-06T09:00:00', '20260406T080000Z'),
        ],
        nextCursor: null,
      });

      // and back across the October change
      const autumn = await allOccurrences(t, 'from=2026-10-19T00:00:00Z&to=2026-11-03T00:00:00Z', auth);
      expect(autumn.map((o) => [o.startAt, o.localStartAt])).toEqual([
        ['2026-10-19T08:00:00.000Z', '2026-10-19T09:00:00'],
        ['2026-10-26T09:00:00.000Z', '2026-10-26T09:00:00'],
        ['2026-11-02T09:00:00.000Z', '2026-11-02T09:00:00'],
      ]);
    });

    it('links an occurrence to the run started for it, and its status', async () => {
      const auth = await t.newKey({ organization: 'calendar-runs' });
      const template = await newTemplate(t, auth);
      const [site, south] = [await newSite(t, auth), await newSite(t, auth, { name: 'South substation' })];
      const schedule = await newSchedule(t, weeklyLondon(template.id, site.id), auth);
      const window = 'from=2026-03-30T00:00:00Z&to=2026-04-07T00:00:00Z';
      const [first, second] = await allOccurrences(t, window, auth);

      const run = (await t.http.post('/v1/runs').set('Authorization', auth)
        .send({ templateId: template.id, siteId: site.id, userId: 'user-42', occurrenceId: first.id }).expect(201)).body;
      expect(run.occurrenceId).toBe(first.id);
      expect(await allOccurrences(t, window, auth)).toEqual([{ ...first, runId: run.id, runStatus: 'in_progress' }, second]);

      await t.http.patch(`/v1/runs/${run.id}`).set('Authorization', auth).send({ answers: { 'fence-intact': false } }).expect(200);
      await t.http.post(`/v1/runs/${run.id}/complete`).set('Authorization', auth).expect(200);
      expect((await allOccurrences(t, window, auth))[0]).toEqual({ ...first, runId: run.id, runStatus: 'completed' });

      // an occurrence has one run
      const dup = await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId: template.id, siteId: site.id, userId: 'ann', occurrenceId: first.id }).expect(409);
      expect(dup.body).toEqual(anError('ALREADY_EXISTS'));
      // the run must match the occurrence's template and site, and the id must be a real occurrence
      const other = await newTemplate(t, auth);
      const wrongTemplate = await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId: other.id, siteId: site.id, userId: 'u', occurrenceId: second.id }).expect(400);
      expect(wrongTemplate.body.details).toEqual([{ path: '/templateId', message: `must be the occurrence's template ${template.id}` }]);
      const wrongSite = await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId: template.id, siteId: south.id, userId: 'u', occurrenceId: second.id }).expect(400);
      expect(wrongSite.body.details).toEqual([{ path: '/siteId', message: `must be the occurrence's site ${site.id}` }]);
      const tuesday = `occ_${schedule.id.slice(4)}_20260331T080000Z`;
      const notOne = await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId: template.id, siteId: site.id, userId: 'u', occurrenceId: tuesday }).expect(400);
      expect(notOne.body.details).toEqual([{ path: '/occurrenceId', message: 'does not name an occurrence of any schedule of this organization' }]);
    });

    it('includes an occurrence that started before the window and is still running', async () => {
      const auth = await t.newKey({ organization: 'calendar-overlap' });
      const template = await newTemplate(t, auth);
      await newSchedule(t, { ...weeklyLondon(template.id, (await newSite(t, auth)).id), startsAt: '2026-06-01T09:00:00', recurrence: undefined, durationMinutes: 120 }, auth);
      expect((await allOccurrences(t, 'from=2026-06-01T09:30:00Z&to=2026-06-02T00:00:00Z', auth)).map((o) => o.startAt)).toEqual(['2026-06-01T08:00:00.000Z']);
      expect(await allOccurrences(t, 'from=2026-06-01T10:00:00Z&to=2026-06-02T00:00:00Z', auth)).toEqual([]);
      expect(await allOccurrences(t, 'from=2026-05-01T00:00:00Z&to=2026-06-01T08:00:00Z', auth)).toEqual([]);
    });

    it('lists no occurrence that would end after 9999-12-31T23:59:59.999Z (no timestamp can say it), nor starts a run for one', async () => {
      const auth = await t.newKey({ organization: 'calendar-year-9999' });
      const template = await newTemplate(t, auth);
      const site = await newSite(t, auth);
      // a week long, every Monday at 09:00 UTC: 9999-12-20 ends within the year, 9999-12-27 would end in 10000
      await newSchedule(t, { templateId: template.id, siteId: site.id, timezone: 'UTC', startsAt: '2026-11-02T09:00:00', durationMinutes: 10080, recurrence: 'FREQ=WEEKLY;BYDAY=MO' }, auth);
      const listed = await allOccurrences(t, 'from=9999-12-20T00:00:00Z&to=9999-12-31T23:59:59Z', auth);
      expect(listed.map((o) => [o.startAt, o.endAt])).toEqual([
        ['9999-12-13T09:00:00.000Z', '9999-12-20T09:00:00.000Z'], // still running when the window opens
        ['9999-12-20T09:00:00.000Z', '9999-12-27T09:00:00.000Z'],
      ]);
      const beyond = `${String(listed[1].id).slice(0, -16)}99991227T090000Z`;
      const refused = await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId: template.id, siteId: site.id, userId: 'u', occurrenceId: beyond }).expect(400);
      expect(refused.body.details).toEqual([{ path: '/occurrenceId', message: 'does not name an occurrence of any schedule of this organization' }]);
    });

    it('orders by startAt then schedule, pages every occurrence exactly once, and filters', async () => {
      const auth = await t.newKey({ organization: 'calendar-paging' });
      const template = await newTemplate(t, auth);
      const [siteA, siteB] = [await newSite(t, auth), await newSite(t, auth)];
      const daily = { ...weeklyLondon(template.id, siteA.id), startsAt: '2026-05-01T08:00:00', recurrence: 'FREQ=DAILY;COUNT=5' };
      const s1 = await newSchedule(t, daily, auth);
      const s2 = await newSchedule(t, { ...daily, siteId: siteB.id, assigneeUserId: 'ann' }, auth);
      const s3 = await newSchedule(t, { ...daily, startsAt: '2026-05-01T08:30:00', recurrence: 'FREQ=DAILY;COUNT=3' }, auth);
      const window = 'from=2026-04-01T00:00:00Z&to=2026-06-01T00:00:00Z';

      const everything = await allOccurrences(t, window, auth, 500);
      expect(everything).toHaveLength(13);
      const [lo, hi] = [s1.id, s2.id].sort();
      expect(everything.slice(0, 3).map((o) => [o.startAt, o.scheduleId])).toEqual([
        ['2026-05-01T07:00:00.000Z', lo], ['2026-05-01T07:00:00.000Z', hi], ['2026-05-01T07:30:00.000Z', s3.id],
      ]);
      const sorted = [...everything].sort((a, b) => (a.startAt as string).localeCompare(b.startAt as string) || (a.scheduleId as string < (b.scheduleId as string) ? -1 : 1));
      expect(everything).toEqual(sorted);

      for (const limit of [1, 2, 5]) expect(await allOccurrences(t, window, auth, limit)).toEqual(everything);

      expect((await allOccurrences(t, `${window}&siteId=${siteA.id}`, auth)).map((o) => o.scheduleId)).toEqual(everything.filter((o) => o.siteId === siteA.id).map((o) => o.scheduleId));
      expect((await allOccurrences(t, `${window}&assigneeUserId=ann`, auth)).every((o) => o.scheduleId === s2.id)).toBe(true);
      expect(await allOccurrences(t, `${window}&scheduleId=${s3.id}`, auth)).toHaveLength(3);
      expect(await allOccurrences(t, `${window}&templateId=tpl_other`, auth)).toEqual([]);
    });

    it('refuses a window over 366 days, an inverted window, a missing bound and a malformed cursor', async () => {
      const long = await t.http.get('/v1/calendar/occurrences?from=2026-01-01T00:00:00Z&to=2027-01-02T00:00:01Z').set('Authorization', t.auth).expect(400);
      expect(long.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/to', message: 'must be at most 366 days after from' }] }));
      await t.http.get('/v1/calendar/occurrences?from=2026-01-01T00:00:00Z&to=2027-01-02T00:00:00Z').set('Authorization', t.auth).expect(200);
      const inverted = await t.http.get('/v1/calendar/occurrences?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z').set('Authorization', t.auth).expect(400);
      expect(inverted.body.details).toEqual([{ path: '/query/to', message: 'must be after from' }]);
      const missing = await t.http.get('/v1/calendar/occurrences?from=2026-02-01T00:00:00Z').set('Authorization', t.auth).expect(400);
      expect(missing.body.details).toEqual([{ path: '/query/to', message: 'is required' }]);
      const notATime = await t.http.get('/v1/calendar/occurrences?from=yesterday&to=2026-01-01T00:00:00Z').set('Authorization', t.auth).expect(400);
      expect(notATime.body.details).toEqual([{ path: '/query/from', message: expect.stringContaining('RFC 3339') }]);
      const cursor = await t.http.get('/v1/calendar/occurrences?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z&cursor=nope').set('Authorization', t.auth).expect(400);
      expect(cursor.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/query/cursor', message: 'is not a cursor issued by this API' }] }));
    });
  });

  describe('scopes and tenancy', () => {
    it('needs calendar:write to create and calendar:read to read', async () => {
      const template = await newTemplate(t);
      const reader = await t.newKey({ scopes: ['calendar:read'] });
      expect((await t.http.post('/v1/schedules').set('Authorization', reader).send(weeklyLondon(template.id, (await newSite(t)).id)).expect(403)).body).toEqual(anError('INSUFFICIENT_SCOPE'));
      await t.http.get('/v1/calendar/occurrences?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z').set('Authorization', reader).expect(200);
      const runsOnly = await t.newKey({ scopes: ['runs:read'] });
      await t.http.get('/v1/calendar/occurrences?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z').set('Authorization', runsOnly).expect(403);
    });

    it("never shows another organization's schedules or occurrences, nor lets it start runs for them", async () => {
      const otherAuth = await t.newKey({ organization: 'other-org-calendar' });
      const template = await newTemplate(t);
      const site = await newSite(t);
      const mine = await newSchedule(t, weeklyLondon(template.id, site.id));
      await t.http.get(`/v1/schedules/${mine.id}`).set('Authorization', otherAuth).expect(404);
      await t.http.patch(`/v1/schedules/${mine.id}`).set('Authorization', otherAuth).send({ durationMinutes: 5 }).expect(404);
      await t.http.delete(`/v1/schedules/${mine.id}`).set('Authorization', otherAuth).expect(404);
      expect((await t.http.get('/v1/schedules').set('Authorization', otherAuth).expect(200)).body).toEqual({ data: [], nextCursor: null });
      expect(await allOccurrences(t, 'from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z', otherAuth)).toEqual([]);

      // a schedule of the other organization cannot name my template nor my site
      const foreign = await t.http.post('/v1/schedules').set('Authorization', otherAuth).send(weeklyLondon(template.id, site.id)).expect(400);
      expect(foreign.body.details.map((d: { path: string }) => d.path)).toEqual(['/templateId', '/siteId']);
      // nor can its runs claim my occurrences
      const [occ] = await allOccurrences(t, `from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&scheduleId=${mine.id}`);
      const theirTemplate = await newTemplate(t, otherAuth);
      const theirSite = await newSite(t, otherAuth);
      const res = await t.http.post('/v1/runs').set('Authorization', otherAuth).send({ templateId: theirTemplate.id, siteId: theirSite.id, userId: 'u', occurrenceId: occ.id }).expect(400);
      expect(res.body.details).toEqual([{ path: '/occurrenceId', message: 'does not name an occurrence of any schedule of this organization' }]);
    });
  });
});
