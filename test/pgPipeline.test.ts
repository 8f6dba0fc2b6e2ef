import pg from 'pg';
import { describeEachDatabase } from './support/testApp';
import { authenticate } from '../runtime/auth/apiKeys';
import { createLog } from '../runtime/domain/logs';
import { runWrite } from '../runtime/idempotency/writes';
import { fingerprint } from '../runtime/idempotency/request';
import type { Reply } from '../runtime/reply';

// On Postgres a write transaction sends the statements whose answer it does not need without
// waiting (runtime/storage/pgPipeline.ts; docs/architecture.md, "Postgres round trips"). What that
// buys is counted here on the wire: a query written while nothing is in flight on its connection
// starts a round trip; one written while earlier queries are unanswered travels with them.
// SQLite has no round trips: its writes are in-process (the group commit's tests cover them).

const settings = { ttlSeconds: 3600, leaseSeconds: 60 };

/** Runs `work` and answers how many round trips its queries started, and its result. */
async function roundTrips<T>(work: () => Promise<T>): Promise<{ started: number; statements: string[]; result: T }> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; readyForQuery: boolean };
  const query = proto.query;
  const statements: string[] = [];
  let started = 0;
  proto.query = function (this: typeof proto, ...args: unknown[]) {
    const config = args[0] as string | { text: string };
    const text = (typeof config === 'string' ? config : config.text).replace(/\s+/g, ' ').trim();
    // nothing in flight on this connection: this query waits for a round trip of its own
    if (this.readyForQuery) started++;
    statements.push(`${this.readyForQuery ? 'waits' : 'rides'}: ${text.slice(0, 40)}`);
    return query.apply(this, args);
  };
  try {
    const result = await work();
    return { started, statements, result };
  } finally {
    proto.query = query;
  }
}

describeEachDatabase('Postgres round trips of a write', (t) => {
  const itOnPostgres = t.kind === 'postgres' ? it : it.skip;
  const body = { entityType: 'checkin', entityId: 'chk_roundtrips', entryType: 'comment' as const, message: 'counted', source: 'api' };
  const logWrite = (orgId: string) => async (trx: Parameters<typeof createLog>[0]): Promise<Reply> => ({ status: 201, body: await createLog(trx, orgId, body) });

  itOnPostgres('a log write waits for Postgres once without an Idempotency-Key and twice with one, and both commit', async () => {
    const { keyId, orgId } = await authenticate(t.db.knex, t.auth);
    // warm: the pool's connections exist and have prepared the statements
    for (let i = 0; i < 3; i++) await runWrite(t.db.knex, settings, { orgId, requestId: 'req_warm' }, logWrite(orgId));

    const plain = await roundTrips(() => runWrite(t.db.knex, settings, { orgId, requestId: 'req_plain' }, logWrite(orgId)));
    // BEGIN, the organization's write lock (runtime/storage/pgGroupCommit.ts), the ordered
    // insert, the event and COMMIT in one flight
    expect({ started: plain.started, statements: plain.statements }).toEqual({ started: 1, statements: expect.arrayContaining([expect.stringMatching(/^waits: BEGIN/), expect.stringMatching(/^rides: COMMIT/)]) });
    expect(plain.statements).toHaveLength(5);
    expect(plain.statements[1]).toMatch(/^rides: select pg_advisory_xact_lock\(hashtext\('w/);

    const keyed = await roundTrips(() =>
      runWrite(t.db.knex, settings, { orgId, keyed: { apiKeyId: keyId, key: 'roundtrips-1', fingerprint: fingerprint('post', '/v1/logs', body) }, requestId: 'req_keyed' }, logWrite(orgId)),
    );
    // BEGIN with the claim (whose answer decides what follows); then the organization's write
    // lock, the insert, the event, the stored answer and COMMIT. A request's write is a
    // member of a shared transaction (runtime/storage/pgGroupCommit.ts), which has no savepoints.
    expect(keyed.started).toBe(2);
    expect(keyed.statements).toHaveLength(7);
    expect(keyed.statements[0]).toMatch(/^waits: BEGIN/);
    expect(keyed.statements[1]).toMatch(/^rides: with l as \(select pg_try_advisory_xact_l/);
    expect(keyed.statements[2]).toMatch(/^waits: select pg_advisory_xact_lock\(hashtext\('w/);
    expect(keyed.statements[6]).toMatch(/^rides: COMMIT/);

    const logs = await t.db.knex('logs').where({ org_id: orgId, entity_id: 'chk_roundtrips' }).select('id');
    expect(logs).toHaveLength(5);
    const events = await t.db.knex('events').where({ org_id: orgId, type: 'log.created' }).select('resource_id');
    expect(events.map((e) => e.resource_id).sort()).toEqual(logs.map((l) => l.id).sort());
    expect(await t.db.knex('idempotency_keys').where({ api_key_id: keyId, idempotency_key: 'roundtrips-1' }).first()).toMatchObject({ state: 'completed', response_status: 201 });
  });

  it('a log write commits the log, its event and the stored answer together, and a replay returns the stored answer', async () => {
    const { keyId, orgId } = await authenticate(t.db.knex, t.auth);
    const keyed = { apiKeyId: keyId, key: 'roundtrips-2', fingerprint: fingerprint('post', '/v1/logs', body) };
    const first = await runWrite(t.db.knex, settings, { orgId, keyed, requestId: 'req_1' }, logWrite(orgId));
    const again = await runWrite(t.db.knex, settings, { orgId, keyed, requestId: 'req_2' }, logWrite(orgId));
    expect(first.replayed).toBe(false);
    expect(again).toEqual({ reply: { status: 201, headers: {}, body: first.reply.body }, replayed: true });
    const id = (first.reply.body as { id: string }).id;
    expect(await t.db.knex('logs').where({ id }).select('id')).toHaveLength(1);
    expect(await t.db.knex('events').where({ org_id: orgId, resource_id: id }).select('type')).toEqual([{ type: 'log.created' }]);
  });
});
