import { describeEachDatabase, anError, itOn, TestContext, TestClient } from './support/testApp';
import { startServerProcesses, ServerProcess } from './support/serverProcess';
import { authenticate, createApiKey, rollApiKey } from '../runtime/auth/apiKeys';
import { inWriteTransaction } from '../runtime/storage/writeTransaction';
import { createSite } from '../runtime/domain/sites';
import { claimIdempotencyKey, releaseIdempotencyKey, runClaimedOperation, storeIdempotentResponse, Claimed, LeaseLostError, IdempotencySettings } from '../runtime/idempotency/claim';
import { fingerprint } from '../runtime/idempotency/request';
import { terminateClaimOwners } from './support/claimLocks';
import { rejectionOf } from './support/databases';

// Idempotency under concurrency, crashes and several servers (docs/architecture.md, "Idempotency").

const settings: IdempotencySettings = { ttlSeconds: 3600, leaseSeconds: 60 };
const past = () => new Date(Date.now() - 60_000).toISOString();

interface Answer {
  status: number;
  body: any;
  replayed: boolean;
}

async function sitesNamed(t: TestContext, name: string): Promise<number> {
  const [{ n }] = await t.db.knex('sites').where({ name }).count({ n: '*' });
  return Number(n);
}

/** Exactly one answer ran the operation; every other one is its replay or IDEMPOTENCY_IN_PROGRESS. */
function expectOneOperation(answers: Answer[]): void {
  const summary = answers.map((a) => `${a.status}${a.replayed ? ' replayed' : ''} ${a.body?.code ?? ''}`.trim());
  const original = answers.filter((a) => a.status === 201 && !a.replayed);
  expect({ originals: original.length, summary }).toEqual({ originals: 1, summary: expect.any(Array) });
  for (const a of answers) {
    if (a.status === 201) expect(a.body).toEqual(original[0].body);
    else expect({ status: a.status, body: a.body }).toEqual({ status: 409, body: anError('IDEMPOTENCY_IN_PROGRESS') });
  }
}

async function viaApp(http: TestClient, auth: string, key: string, body: unknown): Promise<Answer> {
  const res = await http.post('/v1/sites').set('Authorization', auth).set('Idempotency-Key', key).send(body as object);
  return { status: res.status, body: res.body, replayed: res.headers['idempotent-replayed'] === 'true' };
}

async function viaServer(server: ServerProcess, auth: string, key: string, body: unknown): Promise<Answer> {
  const res = await fetch(`${server.baseUrl}/v1/sites`, {
    method: 'POST',
    headers: { Authorization: auth, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, body: await res.json(), replayed: res.headers.get('idempotent-replayed') === 'true' };
}

describeEachDatabase('idempotency under concurrency', (t) => {
  it('20 parallel identical requests create exactly one resource', async () => {
    const body = { name: 'Parallel one app' };
    const answers = await Promise.all(Array.from({ length: 20 }, () => viaApp(t.http, t.auth, 'parallel-1', body)));
    expectOneOperation(answers);
    expect(await sitesNamed(t, body.name)).toBe(1);
  });

  it('the same when half of them are sent with a key rolled from the first (they share its Idempotency-Keys)', async () => {
    const { key, secret } = await createApiKey(t.db.knex, { scopes: ['sites:write'], organization: 'rolled-in-flight' });
    const rolled = await rollApiKey(t.db.knex, key.id, new Date(Date.now() + 3_600_000).toISOString());
    const auths = [`Bearer ${secret}`, `Bearer ${rolled.secret}`];
    const body = { name: 'Parallel across a roll' };
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => viaApp(t.http, auths[i % 2], 'parallel-roll', body)));
    expectOneOperation(answers);
    expect(await sitesNamed(t, body.name)).toBe(1);
  });

  it('the same across two apps with their own connection pools on one database', async () => {
    const other = t.anotherApp();
    const body = { name: 'Parallel two apps' };
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => viaApp(i % 2 ? other.http : t.http, t.auth, 'parallel-2', body)));
    expectOneOperation(answers);
    expect(await sitesNamed(t, body.name)).toBe(1);
    const replay = await viaApp(other.http, t.auth, 'parallel-2', body);
    expect(replay).toMatchObject({ status: 201, replayed: true });
  });

  describe('two server processes on one database', () => {
    let servers: ServerProcess[] = [];
    beforeAll(async () => {
      servers = await startServerProcesses(2, { databaseUrl: t.db.url });
    }, 60_000);
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
    });

    it('20 parallel identical requests spread over both create exactly one resource', async () => {
      const body = { name: 'Parallel two processes' };
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => viaServer(servers[i % 2], t.auth, 'parallel-3', body)));
      expectOneOperation(answers);
      expect(await sitesNamed(t, body.name)).toBe(1);
    });

    it('five keys, eight requests each, interleaved: five resources', async () => {
      const keys = Array.from({ length: 5 }, (_, i) => `parallel-4-${i}`);
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) => viaServer(servers[i % 2], t.auth, keys[i % 5], { name: `Interleaved ${i % 5}` })),
      );
      for (let k = 0; k < 5; k++) {
        expectOneOperation(answers.filter((_, i) => i % 5 === k));
        expect(await sitesNamed(t, `Interleaved ${k}`)).toBe(1);
      }
    });
  });

  describe('a handler that fails after writing', () => {
    const trigger = {
      sqlite: {
        create: [`create trigger idem_boom before update on idempotency_keys when new.state = 'completed' begin select raise(abort, 'boom'); end`],
        drop: ['drop trigger idem_boom'],
      },
      postgres: {
        create: [
          `create function idem_boom() returns trigger language plpgsql as $$ begin raise exception 'boom'; end $$`,
          `create trigger idem_boom before update on idempotency_keys for each row when (new.state = 'completed') execute function idem_boom()`,
        ],
        drop: ['drop trigger idem_boom on idempotency_keys', 'drop function idem_boom()'],
      },
    };

    it('stores nothing and releases the key; the retry succeeds once', async () => {
      const body = { name: 'Fails after writing' };
      for (const sql of trigger[t.kind].create) await t.db.knex.raw(sql);
      try {
        // the site insert succeeds, then storing the response fails: the transaction rolls back
        const failed = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'boom-1').send(body).expect(500);
        expect(failed.body).toEqual(anError('INTERNAL'));
        expect(JSON.stringify(failed.body)).not.toMatch(/boom|idempotency_keys/);
      } finally {
        for (const sql of trigger[t.kind].drop) await t.db.knex.raw(sql);
      }
      expect(await sitesNamed(t, body.name)).toBe(0);
      expect(await t.db.knex('idempotency_keys').where({ idempotency_key: 'boom-1' })).toEqual([]);

      const retry = await viaApp(t.http, t.auth, 'boom-1', body);
      expect(retry).toMatchObject({ status: 201, replayed: false });
      expect(await viaApp(t.http, t.auth, 'boom-1', body)).toEqual({ ...retry, replayed: true });
      expect(await sitesNamed(t, body.name)).toBe(1);
    });
  });

  describe('leases (module level)', () => {
    async function principal() {
      return authenticate(t.db.knex, t.auth);
    }
    const response = (name: string) => ({ status: 201, headers: {}, body: { name } });

    itOn(t, 'sqlite')('a claim is answered only once committed: when the COMMIT it shares with other writes fails, the claim fails too (SQLite group commit)', async () => {
      // Postgres holds the claim in the operation's own transaction
      const { keyId } = await principal();
      const fp = fingerprint('post', '/v1/sites', { name: 'Lost claim' });
      // a write of the same turn whose COMMIT fails for real: a deferred foreign key
      await t.db.knex.raw('create table claim_test_children (id integer primary key, parent_id integer not null references sites(id) deferrable initially deferred)');
      try {
        const orphan = inWriteTransaction(t.db.knex, async (trx) => {
          await trx('claim_test_children').insert({ parent_id: 'no such site' });
        });
        const claim = claimIdempotencyKey(t.db.knex, settings, keyId, 'lost-claim-1', fp);
        expect((await rejectionOf(orphan)).message).toMatch(/FOREIGN KEY constraint failed/);
        // never 'claimed' for a row that is not in the database
        expect((await rejectionOf(claim)).message).toMatch(/FOREIGN KEY constraint failed/);
        expect(await t.db.knex('idempotency_keys').where({ idempotency_key: 'lost-claim-1' })).toEqual([]);
        const retry = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'lost-claim-1', fp)) as Claimed;
        expect(retry.kind).toBe('claimed');
        await releaseIdempotencyKey(t.db.knex, retry);
      } finally {
        await t.db.knex.raw('drop table claim_test_children');
      }
    });

    itOn(t, 'sqlite')('a slow original whose lease was taken over cannot commit; its writes roll back (SQLite lease)', async () => {
      // Postgres: the next test
      const { keyId, orgId } = await principal();
      const fp = fingerprint('post', '/v1/sites', { name: 'Slow' });
      const a = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1', fp)) as Claimed;
      expect(a.kind).toBe('claimed');
      expect(await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1', fp).catch((e) => e.code)).toBe('IDEMPOTENCY_IN_PROGRESS');

      await t.db.knex('idempotency_keys').where({ api_key_id: keyId, idempotency_key: 'lease-1' }).update({ locked_until: past() });
      const b = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1', fp)) as Claimed;
      expect(b).toMatchObject({ kind: 'claimed', token: expect.not.stringMatching(a.token) });

      const slow = inWriteTransaction(t.db.knex, async (trx) => {
        await createSite(trx, orgId, { name: 'Slow A', geofenceRadiusMeters: 100 });
        await storeIdempotentResponse(trx, a, response('Slow A'));
      });
      await expect(slow).rejects.toBeInstanceOf(LeaseLostError);
      expect(await sitesNamed(t, 'Slow A')).toBe(0);

      await inWriteTransaction(t.db.knex, async (trx) => {
        await createSite(trx, orgId, { name: 'Slow B', geofenceRadiusMeters: 100 });
        await storeIdempotentResponse(trx, b, response('Slow B'));
      });
      expect(await sitesNamed(t, 'Slow B')).toBe(1);
      expect(await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1', fp)).toEqual({ kind: 'replay', response: response('Slow B') });
    });

    itOn(t, 'postgres')('a slow original whose connection was lost cannot commit; the key is free at once (Postgres lock)', async () => {
      const { keyId, orgId } = await principal();
      const fp = fingerprint('post', '/v1/sites', { name: 'Slow' });
      const a = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1p', fp)) as Claimed;
      expect(a.kind).toBe('claimed');
      expect(await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1p', fp).catch((e) => e.code)).toBe('IDEMPOTENCY_IN_PROGRESS');
      // a lease running out changes nothing while the owner holds the lock
      await t.db.knex('idempotency_keys').where({ api_key_id: keyId, idempotency_key: 'lease-1p' }).update({ locked_until: past() });
      expect(await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1p', fp).catch((e) => e.code)).toBe('IDEMPOTENCY_IN_PROGRESS');

      expect(await terminateClaimOwners(t.db.knex, keyId, 'lease-1p')).toBe(1);
      const b = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1p', fp)) as Claimed;
      expect(b).toMatchObject({ kind: 'claimed', token: expect.not.stringMatching(a.token) });

      const slow = runClaimedOperation(t.db.knex, a, async (trx) => {
        await createSite(trx, orgId, { name: 'Slow A', geofenceRadiusMeters: 100 });
        await storeIdempotentResponse(trx, a, response('Slow A'));
      });
      await expect(slow).rejects.toThrow();
      await releaseIdempotencyKey(t.db.knex, a);
      expect(await sitesNamed(t, 'Slow A')).toBe(0);

      await runClaimedOperation(t.db.knex, b, async (trx) => {
        await createSite(trx, orgId, { name: 'Slow B', geofenceRadiusMeters: 100 });
        await storeIdempotentResponse(trx, b, response('Slow B'));
      });
      expect(await sitesNamed(t, 'Slow B')).toBe(1);
      expect(await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-1p', fp)).toEqual({ kind: 'replay', response: response('Slow B') });
    });

    it('an answer stored for a token the row no longer holds fails the whole write, also when it travels with the COMMIT (Postgres)', async () => {
      // On Postgres the stored answer is sent without waiting, with the COMMIT behind it
      // (runtime/storage/pgPipeline.ts): the fence must fail the statement itself, so that the
      // COMMIT rolls back — a statement that merely changed no row would let the write commit.
      const { keyId, orgId } = await principal();
      const fp = fingerprint('post', '/v1/sites', { name: 'Fenced' });
      await t.db.knex('idempotency_keys').insert({
        api_key_id: keyId, idempotency_key: 'fence-1', fingerprint: fp, state: 'in_progress', lock_token: 'someone-else',
        locked_until: new Date(Date.now() + 60_000).toISOString(), created_at: new Date().toISOString(), expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      });
      const mine: Claimed = { kind: 'claimed', apiKeyId: keyId, key: 'fence-1', token: 'mine' };
      const write = inWriteTransaction(t.db.knex, async (trx) => {
        await createSite(trx, orgId, { name: 'Fenced A', geofenceRadiusMeters: 100 });
        await storeIdempotentResponse(trx, mine, response('Fenced A'));
        return 'committed';
      });
      await expect(write).rejects.toBeInstanceOf(LeaseLostError);
      expect(await sitesNamed(t, 'Fenced A')).toBe(0);
      expect(await t.db.knex('events').where({ org_id: orgId, type: 'site.created' }).whereLike('data', '%Fenced A%')).toEqual([]);
      expect(await t.db.knex('idempotency_keys').where({ api_key_id: keyId, idempotency_key: 'fence-1' }).first()).toMatchObject({ state: 'in_progress', lock_token: 'someone-else' });
      // the connection serves the next write
      await inWriteTransaction(t.db.knex, (trx) => createSite(trx, orgId, { name: 'Fenced B', geofenceRadiusMeters: 100 }));
      expect(await sitesNamed(t, 'Fenced B')).toBe(1);
    });

    // SQLite in one process cannot show this: better-sqlite3 waits for a lock synchronously,
    // blocking the event loop that would release it; the two-process tests cover SQLite.
    itOn(t, 'postgres')('a retry while the original is about to commit answers IDEMPOTENCY_IN_PROGRESS at once, then replays (Postgres lock)', async () => {
      const { keyId, orgId } = await principal();
      const other = t.db.openAnother();
      try {
        const fp = fingerprint('post', '/v1/sites', { name: 'Race' });
        const a = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'lease-2', fp)) as Claimed;

        let stored!: () => void;
        let finish!: () => void;
        const hasStored = new Promise<void>((r) => (stored = r));
        const mayCommit = new Promise<void>((r) => (finish = r));
        const original = runClaimedOperation(t.db.knex, a, async (trx) => {
          await createSite(trx, orgId, { name: 'Race A', geofenceRadiusMeters: 100 });
          await storeIdempotentResponse(trx, a, response('Race A'));
          stored();
          await mayCommit;
        });
        await hasStored;
        expect(await claimIdempotencyKey(other.knex, settings, keyId, 'lease-2', fp).catch((e) => e.code)).toBe('IDEMPOTENCY_IN_PROGRESS');
        finish();
        await original;
        expect(await claimIdempotencyKey(other.knex, settings, keyId, 'lease-2', fp)).toEqual({ kind: 'replay', response: response('Race A') });
        expect(await sitesNamed(t, 'Race A')).toBe(1);
      } finally {
        await other.close();
      }
    });
  });
});
