import { Knex } from 'knex';
import { describeEachDatabase, anError, itOn, TestContext, TEST_ENV } from './support/testApp';
import { startServerProcess, ServerProcess } from './support/serverProcess';
import { claimOwnerPids } from './support/claimLocks';
import { authenticate } from '../runtime/auth/apiKeys';
import { claimIdempotencyKey, leaseRenewalMs, releaseIdempotencyKey, Claimed } from '../runtime/idempotency/claim';
import { fingerprint } from '../runtime/idempotency/request';

// A server process killed (SIGKILL) while an idempotent write is in flight: the retry with the
// same key is processed as soon as the owner is known to be gone — within 2 s on Postgres, and on
// SQLite within the lease (IDEMPOTENCY_LEASE_SECONDS, 8 s by default, as the README's settings
// table says) plus 1 s for the retry to be sent and answered, of a serving process being there —
// exactly once, and never while the original
// still runs. The slow write is real: a trigger on one marked reading of a 300-reading batch
// (SQLite: a CPU-bound recursive query of about 3 s; Postgres: a row lock the test holds).

const BOUND_MS = { postgres: 2000, sqlite: 8_000 + 1_000 };
const BATCH = 300;

function batch(tag: string) {
  return {
    readings: Array.from({ length: BATCH }, (_, i) => ({
      provider: 'crash-test',
      sensorExternalId: i === BATCH - 1 ? `${tag}-slow` : `${tag}-sensor`,
      siteId: 'site_pnz0kq6q5sxr6t5gncr5m1y7',
      metric: 'temperature_c',
      value: i,
      unit: 'C',
      occurredAt: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
    })),
  };
}

interface Answer {
  status: number;
  body: any;
  replayed: boolean;
}

async function post(server: ServerProcess, auth: string, key: string, body: unknown, timeoutMs = 15_000): Promise<Answer> {
  const res = await fetch(`${server.baseUrl}/v1/sensor-readings`, {
    method: 'POST',
    headers: { Authorization: auth, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, body: await res.json(), replayed: res.headers.get('idempotent-replayed') === 'true' };
}

/** Calibrates a recursive count that keeps this machine's SQLite busy for about `ms`. */
function sqliteBurnLimit(ms: number): number {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Sqlite = require('better-sqlite3');
  const db = new Sqlite(':memory:');
  const probe = 2_000_000;
  const started = process.hrtime.bigint();
  db.prepare(`select count(*) from (with recursive c(i) as (select 1 union all select i + 1 from c where i < ${probe}) select i from c)`).get();
  const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
  db.close();
  return Math.round((probe * ms) / Math.max(elapsedMs, 1));
}

/** Makes the marked reading's insert slow (between hold and letGo), inside the operation's transaction. */
async function installSlowWrite(t: TestContext): Promise<{ hold(): Promise<void>; letGo(): Promise<void> }> {
  const db = t.db.knex;
  if (t.kind === 'sqlite') {
    const limit = sqliteBurnLimit(3000);
    return {
      async hold() {
        await db.raw(
          `create trigger if not exists crash_slow_reading before insert on sensor_readings when new.sensor_external_id like '%-slow'
           begin select count(*) from (with recursive c(i) as (select 1 union all select i + 1 from c where i < ${limit}) select i from c); end`,
        );
      },
      // the retry need not be slow too
      letGo: () => db.raw('drop trigger if exists crash_slow_reading').then(() => undefined),
    };
  }
  await db.raw('create table crash_gate (id integer primary key)');
  await db.raw('insert into crash_gate values (1)');
  await db.raw(`create function crash_slow_reading() returns trigger language plpgsql as $$
    begin perform 1 from crash_gate where id = 1 for update; return new; end $$`);
  await db.raw(`create trigger crash_slow_reading before insert on sensor_readings for each row
    when (new.sensor_external_id like '%-slow') execute function crash_slow_reading()`);
  let gate: Knex.Transaction | undefined;
  return {
    // the gate's row lock, held by the test, stops the marked insert until it is let go
    async hold() {
      gate = await db.transaction();
      await gate('crash_gate').where({ id: 1 }).forUpdate();
    },
    async letGo() {
      await gate?.commit();
      gate = undefined;
    },
  };
}

describeEachDatabase('idempotency after a crash (SIGKILL mid-request)', (t) => {
  let slow: { hold(): Promise<void>; letGo(): Promise<void> };
  let keyId: string;
  let orgId: string;
  const servers: ServerProcess[] = [];
  const measured: string[] = [];

  beforeAll(async () => {
    slow = await installSlowWrite(t);
    ({ keyId, orgId } = await authenticate(t.db.knex, t.auth));
  });
  afterAll(async () => {
    if (measured.length) console.info(measured.join('\n'));
    await slow.letGo().catch(() => undefined); // each test lets go itself; this is for a failed one
    await Promise.all(servers.map((s) => s.stop()));
  });

  async function start(): Promise<{ server: ServerProcess; healthyAt: number }> {
    // the retry loop below asks every 100 ms, far beyond a client's budget of batches per minute:
    // the budgets are not what this test is about
    const server = await startServerProcess({ databaseUrl: t.db.url, env: TEST_ENV });
    const healthyAt = Date.now(); // startServerProcess resolves on the first /healthz 200
    servers.push(server);
    return { server, healthyAt };
  }

  async function readingsOf(tag: string): Promise<number> {
    const [{ n }] = await t.db.knex('sensor_readings').where({ org_id: orgId }).andWhere('sensor_external_id', 'like', `${tag}-%`).count({ n: '*' });
    return Number(n);
  }

  /** Resolves once the request with `key` has claimed it and is inside its slow write. */
  async function untilInFlight(key: string): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const running =
        t.kind === 'postgres'
          ? (await claimOwnerPids(t.db.knex, keyId, key)).length === 1
          : (await t.db.knex('idempotency_keys').where({ api_key_id: keyId, idempotency_key: key }).first())?.state === 'in_progress';
      if (running) {
        // SQLite commits the claim just before the operation's transaction: give it time to
        // reach the slow insert (the write takes about 3 s)
        if (t.kind === 'sqlite') await new Promise((r) => setTimeout(r, 500));
        return;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`the request with key ${key} never got in flight`);
  }

  /** Kills `server` with the write in flight; the client sees its connection reset. */
  async function killMidRequest(server: ServerProcess, key: string, body: unknown): Promise<void> {
    await slow.hold();
    const original = post(server, t.auth, key, body).then(
      (a) => ({ answered: a }),
      (err: Error) => ({ failed: String(err) }), // fetch's own error class, from another realm
    );
    await untilInFlight(key);
    process.kill(server.pid, 'SIGKILL');
    const outcome = await original;
    expect(outcome).toEqual({ failed: expect.any(String) });
    // what the dead process left: an in-progress claim (SQLite) or nothing committed (Postgres)
    const row = await t.db.knex('idempotency_keys').where({ api_key_id: keyId, idempotency_key: key }).first();
    if (t.kind === 'sqlite') expect(row).toMatchObject({ state: 'in_progress' });
    else expect(row).toBeUndefined();
    // Postgres: the dead process's backend still waits at the gate; once let go, it notices the
    // closed connection and rolls back. SQLite: the retry's own write is fast.
    await slow.letGo();
  }

  /** Retries every 100 ms until the answer is not IDEMPOTENCY_IN_PROGRESS; returns it and when it came. */
  async function retryUntilProcessed(server: ServerProcess, key: string, body: unknown): Promise<{ answer: Answer; at: number; busy: number }> {
    const deadline = Date.now() + 30_000;
    let busy = 0;
    for (;;) {
      const answer = await post(server, t.auth, key, body);
      if (answer.status !== 409) return { answer, at: Date.now(), busy };
      expect(answer.body).toEqual(anError('IDEMPOTENCY_IN_PROGRESS'));
      busy++;
      if (Date.now() > deadline) throw new Error(`key ${key} still in progress after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it('a restarted server processes the retry within the bound, exactly once', async () => {
    const { server: first } = await start();
    const body = batch('restart');
    await killMidRequest(first, 'crash-restart', body);
    expect(await readingsOf('restart')).toBe(0);

    const { server: second, healthyAt } = await start();
    const { answer, at, busy } = await retryUntilProcessed(second, 'crash-restart', body);
    measured.push(`[${t.kind}] restart (first /healthz 200) → first successful retry: ${at - healthyAt} ms (${busy} × IDEMPOTENCY_IN_PROGRESS before)`);
    expect(answer).toMatchObject({ status: 201, replayed: false, body: { ingested: BATCH, duplicates: 0 } });
    expect(at - healthyAt).toBeLessThanOrEqual(BOUND_MS[t.kind]);
    expect(await readingsOf('restart')).toBe(BATCH);
    expect(await post(second, t.auth, 'crash-restart', body)).toEqual({ ...answer, replayed: true });
    await second.stop();
  }, 60_000);

  it('a process that ran all along answers IDEMPOTENCY_IN_PROGRESS while the original runs, and processes the retry within the bound once it died', async () => {
    const [{ server: doomed }, { server: survivor }] = await Promise.all([start(), start()]);
    const body = batch('survivor');
    await slow.hold();
    const original = post(doomed, t.auth, 'crash-survivor', body).then((a) => a.status, (err: Error) => String(err));
    await untilInFlight('crash-survivor');
    // genuinely running: the other process refuses the duplicate at once
    expect(await post(survivor, t.auth, 'crash-survivor', body)).toMatchObject({ status: 409, body: anError('IDEMPOTENCY_IN_PROGRESS') });

    process.kill(doomed.pid, 'SIGKILL');
    const diedAt = Date.now();
    expect(await original).toEqual(expect.any(String)); // the connection was reset, no answer
    await slow.letGo();
    const { answer, at, busy } = await retryUntilProcessed(survivor, 'crash-survivor', body);
    measured.push(`[${t.kind}] SIGKILL → first successful retry on the other process: ${at - diedAt} ms (${busy} × IDEMPOTENCY_IN_PROGRESS before)`);
    expect(answer).toMatchObject({ status: 201, replayed: false, body: { ingested: BATCH, duplicates: 0 } });
    expect(at - diedAt).toBeLessThanOrEqual(BOUND_MS[t.kind]);
    expect(await readingsOf('survivor')).toBe(BATCH);
    expect(await post(survivor, t.auth, 'crash-survivor', body)).toEqual({ ...answer, replayed: true });
  }, 60_000);

  it('an original that is slow but alive is never taken over: the duplicate gets its answer replayed', async () => {
    const [{ server: a }, { server: b }] = await Promise.all([start(), start()]);
    const body = batch('alive');
    await slow.hold();
    const original = post(a, t.auth, 'crash-alive', body);
    await untilInFlight('crash-alive');
    expect(await post(b, t.auth, 'crash-alive', body)).toMatchObject({ status: 409, body: anError('IDEMPOTENCY_IN_PROGRESS') });
    await slow.letGo();
    const first = await original;
    expect(first).toMatchObject({ status: 201, replayed: false });
    expect(await post(b, t.auth, 'crash-alive', body)).toEqual({ ...first, replayed: true });
    expect(await readingsOf('alive')).toBe(BATCH);
  }, 60_000);

  itOn(t, 'sqlite')('SQLite: a running request renews its lease, so it outlives IDEMPOTENCY_LEASE_SECONDS', async () => {
    const settings = { ttlSeconds: 3600, leaseSeconds: 2 };
    const fp = fingerprint('post', '/v1/sensor-readings', {});
    const claim = (await claimIdempotencyKey(t.db.knex, settings, keyId, 'renewed', fp)) as Claimed;
    const firstLease = (await t.db.knex('idempotency_keys').where({ idempotency_key: 'renewed' }).first()).locked_until;
    await new Promise((r) => setTimeout(r, settings.leaseSeconds * 1000 + 2 * leaseRenewalMs(settings.leaseSeconds)));
    const row = await t.db.knex('idempotency_keys').where({ idempotency_key: 'renewed' }).first();
    expect(row.locked_until > firstLease).toBe(true);
    expect(await claimIdempotencyKey(t.db.knex, settings, keyId, 'renewed', fp).catch((e) => e.code)).toBe('IDEMPOTENCY_IN_PROGRESS');
    await releaseIdempotencyKey(t.db.knex, claim);
    const next = await claimIdempotencyKey(t.db.knex, settings, keyId, 'renewed', fp);
    expect(next).toMatchObject({ kind: 'claimed' });
    await releaseIdempotencyKey(t.db.knex, next as Claimed);
  }, 20_000);
});
