import { describeEachDatabase } from './support/testApp';
import { createSite } from '../runtime/domain/sites';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeEachDatabase('list ordering under concurrent inserts (docs/architecture.md, "Lists and cursors")', (t) => {
  // Postgres only: there `seq` is assigned at INSERT but visible at COMMIT, so without the
  // per-(table, organization) advisory lock a later seq could become visible before an earlier
  // one. SQLite has one writer at a time, so the race cannot happen there (and transaction A
  // below would simply block the second writer's BEGIN IMMEDIATE until the test timed out).
  const itOnPostgres = t.kind === 'postgres' ? it : it.skip;

  itOnPostgres('a walk returns an item whose transaction commits after a later insert, exactly once', async () => {
    const auth = await t.newKey({ organization: 'ordering' });
    const org = await t.db.knex('organizations').where({ name: 'ordering' }).first('id');
    const orgId: string = org.id;
    const page = async (cursor: string | null) =>
      (await t.http.get(`/v1/sites?limit=1${cursor ? `&cursor=${cursor}` : ''}`).set('Authorization', auth).expect(200)).body as {
        data: { name: string }[];
        nextCursor: string | null;
      };

    await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'P1' }).expect(201);
    // A sentinel that sorts after everything, so the reader below is mid-walk (holds a cursor)
    // rather than at the end of the list when it pauses.
    const sentinel = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'last' }).expect(201)).body;
    await t.db.knex('sites').where({ id: sentinel.id }).update({ seq: 1_000_000_000 });

    // Transaction A takes its seq and stays open.
    const trx = await t.db.knex.transaction();
    let b: Promise<unknown> | undefined;
    try {
      await createSite(trx, orgId, { name: 'A', geofenceRadiusMeters: 100 });

      // B inserts into the same organization's sites: it must wait for A's lock.
      let bDone = false;
      b = t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'B' }).then((res) => {
        bDone = true;
        return res;
      });
      await sleep(300);
      const blockedWhileAOpen = !bDone;

      // A reader walks one item per page as far as it can, pausing before the sentinel.
      const seen: string[] = [];
      let cursor: string | null = null;
      for (;;) {
        const { data, nextCursor } = await page(cursor);
        if (data[0]?.name === 'last') break;
        seen.push(...data.map((s) => s.name));
        cursor = nextCursor;
      }

      await trx.commit();
      const bRes = (await b) as { status: number };
      expect(bRes.status).toBe(201);

      // The reader continues its walk to the end.
      do {
        const { data, nextCursor }: { data: { name: string }[]; nextCursor: string | null } = await page(cursor);
        seen.push(...data.map((s) => s.name));
        cursor = nextCursor;
      } while (cursor);

      expect({ blockedWhileAOpen, seen }).toEqual({ blockedWhileAOpen: true, seen: ['P1', 'A', 'B', 'last'] });
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
      await b?.catch(() => undefined);
    }
  });
});
