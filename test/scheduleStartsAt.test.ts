import { describeEachDatabase, anError, TestContext } from './support/testApp';
import { newSite } from './support/resources';

// A schedule's `startsAt` sent as a local wall-clock time or as an instant with an offset / Z.
// Europe/Paris: UTC+1 until 2027-03-28 02:00, then UTC+2. Europe/London: UTC until then, then UTC+1.

async function newTemplate(t: TestContext) {
  const checklist = { name: 'Weekly walk-round', items: [{ id: 'fence-intact', label: 'Perimeter fence intact', type: 'yes_no', required: true }] };
  return (await t.http.post('/v1/templates').set('Authorization', t.auth).send(checklist).expect(201)).body as { id: string };
}

describeEachDatabase('schedule startsAt forms', (t) => {
  const createSchedule = (body: object) => t.http.post('/v1/schedules').set('Authorization', t.auth).send(body);
  const patchSchedule = (id: string, body: object) => t.http.patch(`/v1/schedules/${id}`).set('Authorization', t.auth).send(body);
  const occurrences = async (scheduleId: string, from: string, to: string) =>
    (await t.http.get(`/v1/calendar/occurrences?scheduleId=${scheduleId}&from=${from}&to=${to}`).set('Authorization', t.auth).expect(200)).body.data as
      { startAt: string; localStartAt: string }[];

  it('stores an offset startsAt as the wall clock of the schedule zone, shows both forms, and keeps 09:00 local across the DST change', async () => {
    const template = await newTemplate(t);
    const weekly = { templateId: template.id, siteId: (await newSite(t)).id, timezone: 'Europe/Paris', durationMinutes: 30, recurrence: 'FREQ=WEEKLY;BYDAY=MO' };
    const withOffset = await createSchedule({ ...weekly, startsAt: '2027-03-15T09:00:00+01:00' }).expect(201);
    expect(withOffset.body).toEqual(expect.objectContaining({ startsAt: '2027-03-15T09:00:00', startsAtUtc: '2027-03-15T08:00:00.000Z', timezone: 'Europe/Paris' }));
    expect(await t.db.knex('schedules').where({ id: withOffset.body.id }).first()).toMatchObject({ starts_at: '2027-03-15T09:00:00' });
    expect((await t.http.get(`/v1/schedules/${withOffset.body.id}`).set('Authorization', t.auth).expect(200)).body).toEqual(withOffset.body);

    const seen = await occurrences(withOffset.body.id, '2027-03-15T00:00:00Z', '2027-04-06T00:00:00Z');
    expect(seen.map((o) => [o.startAt, o.localStartAt])).toEqual([
      ['2027-03-15T08:00:00.000Z', '2027-03-15T09:00:00'],
      ['2027-03-22T08:00:00.000Z', '2027-03-22T09:00:00'],
      ['2027-03-29T07:00:00.000Z', '2027-03-29T09:00:00'],
      ['2027-04-05T07:00:00.000Z', '2027-04-05T09:00:00'],
    ]);

    // the same start as local time, and as the same instant in Z form, give the same schedule
    for (const startsAt of ['2027-03-15T09:00:00', '2027-03-15T08:00:00Z']) {
      const other = await createSchedule({ ...weekly, startsAt }).expect(201);
      expect(other.body).toEqual(expect.objectContaining({ startsAt: '2027-03-15T09:00:00', startsAtUtc: '2027-03-15T08:00:00.000Z' }));
      expect(await occurrences(other.body.id, '2027-03-15T00:00:00Z', '2027-04-06T00:00:00Z')).toEqual(seen.map((o) => expect.objectContaining({ startAt: o.startAt, localStartAt: o.localStartAt })));
    }
  });

  it('reads an instant in the schedule zone even when the offset is another zone, and drops a fraction of a second', async () => {
    const template = await newTemplate(t);
    const base = { templateId: template.id, siteId: (await newSite(t)).id, timezone: 'Europe/London' };
    const fromParis = await createSchedule({ ...base, startsAt: '2027-03-15T09:00:00+01:00' }).expect(201);
    expect(fromParis.body).toEqual(expect.objectContaining({ startsAt: '2027-03-15T08:00:00', startsAtUtc: '2027-03-15T08:00:00.000Z' }));
    const summer = await createSchedule({ ...base, startsAt: '2027-07-01T08:00:00.750Z' }).expect(201);
    expect(summer.body).toEqual(expect.objectContaining({ startsAt: '2027-07-01T09:00:00', startsAtUtc: '2027-07-01T08:00:00.000Z' }));
  });

  it('accepts both forms on update, reading an instant in the zone sent with it or else the stored one', async () => {
    const template = await newTemplate(t);
    const created = (await createSchedule({ templateId: template.id, siteId: (await newSite(t)).id, timezone: 'Europe/London', startsAt: '2027-01-04T09:00:00' }).expect(201)).body;
    expect(created.startsAtUtc).toBe('2027-01-04T09:00:00.000Z');

    const storedZone = await patchSchedule(created.id, { startsAt: '2027-06-07T10:00:00+02:00' }).expect(200);
    expect(storedZone.body).toEqual(expect.objectContaining({ timezone: 'Europe/London', startsAt: '2027-06-07T09:00:00', startsAtUtc: '2027-06-07T08:00:00.000Z' }));

    const newZone = await patchSchedule(created.id, { timezone: 'America/New_York', startsAt: '2027-06-07T13:00:00Z' }).expect(200);
    expect(newZone.body).toEqual(expect.objectContaining({ timezone: 'America/New_York', startsAt: '2027-06-07T09:00:00', startsAtUtc: '2027-06-07T13:00:00.000Z' }));

    // a zone change alone keeps the local time; the instant moves with it
    const zoneOnly = await patchSchedule(created.id, { timezone: 'Asia/Tokyo' }).expect(200);
    expect(zoneOnly.body).toEqual(expect.objectContaining({ startsAt: '2027-06-07T09:00:00', startsAtUtc: '2027-06-07T00:00:00.000Z' }));

    const local = await patchSchedule(created.id, { startsAt: '2027-06-08T07:15:00' }).expect(200);
    expect(local.body).toEqual(expect.objectContaining({ startsAt: '2027-06-08T07:15:00', startsAtUtc: '2027-06-07T22:15:00.000Z' }));
  });

  it('answers 404 for an unknown schedule in either form, and 400 naming startsAt for what is no date-time or out of range', async () => {
    for (const startsAt of ['2027-06-07T10:00:00+02:00', '2027-06-07T10:00:00']) {
      expect((await patchSchedule('sch_000000000000000000000000', { startsAt }).expect(404)).body).toEqual(anError('NOT_FOUND'));
    }
    const template = await newTemplate(t);
    const base = { templateId: template.id, siteId: (await newSite(t)).id };
    const refused = [
      [{ timezone: 'Pacific/Kiritimati', startsAt: '2200-12-31T12:00:00Z' }, 'must be between the years 1970 and 2200'],
      [{ timezone: 'America/New_York', startsAt: '1970-01-01T00:00:00Z' }, 'must be between the years 1970 and 2200'],
      [{ timezone: 'Europe/London', startsAt: '2027-02-30T09:00:00+01:00' }, 'must be a real date and time (got "2027-02-30T09:00:00+01:00")'],
      [{ timezone: 'Europe/London', startsAt: '2027-03-15T09:00:00+0100' }, expect.stringContaining('must match pattern')],
      [{ timezone: 'Europe/London', startsAt: '2027-03-15T09:00:00.5' }, expect.stringContaining('must match pattern')],
    ] as const;
    for (const [change, message] of refused) {
      const res = await createSchedule({ ...base, ...change }).expect(400);
      expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/startsAt', message }] }));
    }
  });
});
