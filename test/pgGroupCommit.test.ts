import type { Knex } from 'knex';
import { describeEachDatabase } from './support/testApp';
import { authenticate } from '../runtime/auth/apiKeys';
import { createLog } from '../runtime/domain/logs';
import { createSite, deleteSite, updateSite } from '../runtime/domain/sites';
import { createUser, updateUser } from '../runtime/domain/users';
import { createTemplate, deleteTemplate, updateTemplate } from '../runtime/domain/templates';
import { createAsset } from '../runtime/domain/assets';
import { createRun } from '../runtime/domain/runs';
import * as assetsRepository from '../runtime/storage/repositories/assetsRepository';
import { createCheckin, updateCheckin } from '../runtime/domain/checkins';
import { runWrite } from '../runtime/idempotency/writes';
import { fingerprint } from '../runtime/idempotency/request';
import { ApiError } from '../runtime/errors';
import { MAX_PG_BATCH } from '../runtime/storage/pgGroupCommit';
import { isDatabaseUnavailable } from '../runtime/storage/databaseErrors';
import type { Reply } from '../runtime/reply';

// On Postgres the write requests of one turn of the event loop share one transaction and its
// commit (runtime/storage/pgGroupCommit.ts; docs/architecture.md, "Postgres group commit"). Which
// transaction wrote a row is Postgres' own `xmin` of the row: the same for the writes that
// committed together. SQLite has its own group commit (test/sqliteGroupCommit.test.ts).

const settings = { ttlSeconds: 3600, leaseSeconds: 60 };

/** A write's answer: its status, or the code of the error it threw (an API error's, or Postgres' SQLSTATE). */
const outcome = (r: PromiseSettledResult<{ reply: Reply }>) => (r.status === 'fulfilled' ? r.value.reply.status : (r.reason as ApiError).code ?? String(r.reason));

describeEachDatabase('Postgres group commit of write requests', (t) => {
  const itOnPostgres = t.kind === 'postgres' ? it : it.skip;
  let orgId: string;
  let keyId: string;

  beforeAll(async () => {
    ({ keyId, orgId } = await authenticate(t.db.knex, t.auth));
  });

  /** A log write for runWrite, counting how often it ran; `then` runs after the log is written. */
  function logWrite(entityId: string, then?: (trx: Knex) => Promise<void>) {
    const ran = { count: 0 };
    const work = async (trx: Knex): Promise<Reply> => {
      ran.count++;
      const log = await createLog(trx, orgId, { entityType: 'checkin', entityId, entryType: 'comment', message: entityId, source: 'api' });
      await then?.(trx);
      return { status: 201, body: log };
    };
    return { ran, work };
  }

  /** The `xmin` (writing transaction) of each log of these entities, by entity id. */
  async function writers(entityIds: string[]): Promise<Record<string, string>> {
    const rows: { entity_id: string; xmin: string }[] = await t.db.knex('logs').whereIn('entity_id', entityIds).select('entity_id', t.db.knex.raw('xmin::text as xmin'));
    return Object.fromEntries(rows.map((r) => [r.entity_id, r.xmin]));
  }

  const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

  /** How many deadlocks Postgres has broken in this database so far. */
  const deadlocks = async () => Number((await t.db.knex.raw('select deadlocks from pg_stat_database where datname = current_database()')).rows[0].deadlocks);

  /** A promise a write waits on (`gate`) until the test opens it. */
  function aGate(): { gate: Promise<void>; openGate: () => void } {
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => { openGate = resolve; });
    return { gate, openGate };
  }

  /** Counts the pooled connections held at once, until restore(). */
  function heldConnections(): { most(): number; restore(): void } {
    const pool = t.db.knex.client as unknown as { acquireConnection(): Promise<unknown>; releaseConnection(conn: unknown): Promise<unknown> };
    const { acquireConnection, releaseConnection } = pool;
    let held = 0;
    let most = 0;
    pool.acquireConnection = async function (this: unknown) {
      const conn = await acquireConnection.call(this);
      most = Math.max(most, ++held);
      return conn;
    };
    pool.releaseConnection = async function (this: unknown, conn: unknown) {
      held--;
      return releaseConnection.call(this, conn);
    };
    return {
      most: () => most,
      restore() {
        pool.acquireConnection = acquireConnection;
        pool.releaseConnection = releaseConnection;
      },
    };
  }

  /** A site made by a write request of its own. */
  const createSiteAlone = async (name: string) =>
    (await runWrite(t.db.knex, settings, { orgId, requestId: 'req_site' }, async (trx) => ({ status: 201, body: await createSite(trx, orgId, { name, geofenceRadiusMeters: 150 }) }))).reply.body as Record<string, unknown> & { id: string };

  itOnPostgres('the writes of one turn commit in one transaction, each with its event, and the batch holds at most MAX_PG_BATCH', async () => {
    const entities = ids('together', MAX_PG_BATCH + 2);
    const results = await Promise.all(entities.map((e) => runWrite(t.db.knex, settings, { orgId, requestId: `req_${e}` }, logWrite(e).work)));
    expect(results.map((r) => r.reply.status)).toEqual(entities.map(() => 201));
    const xmins = await writers(entities);
    expect(Object.keys(xmins).sort()).toEqual([...entities].sort());
    // the first MAX_PG_BATCH share one transaction; the two after them another one
    expect(new Set(entities.slice(0, MAX_PG_BATCH).map((e) => xmins[e])).size).toBe(1);
    expect(new Set(entities.slice(MAX_PG_BATCH).map((e) => xmins[e])).size).toBe(1);
    expect(xmins[entities[0]]).not.toBe(xmins[entities[MAX_PG_BATCH]]);
    const events = await t.db.knex('events').whereIn('resource_id', results.map((r) => (r.reply.body as { id: string }).id)).select('type');
    expect(events).toHaveLength(entities.length);
  });

  itOnPostgres("a burst of one organization's writes, one per turn, holds one pooled connection at a time and shares fewer batches", async () => {
    // each batch's work takes a while, so that without the wait each turn's batch would take a
    // connection of its own and queue on the organization's write lock with it
    const held = heldConnections();
    try {
      const entities = ids('burst', 24);
      const pending: Promise<{ reply: Reply }>[] = [];
      for (const e of entities) {
        pending.push(runWrite(t.db.knex, settings, { orgId, requestId: `req_${e}` }, logWrite(e, async (trx) => { await trx.raw('select pg_sleep(0.02)'); }).work));
        await new Promise((resolve) => setImmediate(resolve));
      }
      const results = await Promise.all(pending);
      expect(results.map((r) => r.reply.status)).toEqual(entities.map(() => 201));
      expect(held.most()).toBe(1);
      // the writes that came while a batch ran shared the next one
      expect(new Set(Object.values(await writers(entities))).size).toBeLessThan(entities.length / 2);
    } finally {
      held.restore();
    }
  });

  itOnPostgres("two organizations' writes in one turn commit in a batch each, behind each organization's write lock", async () => {
    const other = (await authenticate(t.db.knex, await t.newKey({ organization: 'group-commit-other' }))).orgId;
    const mine = ids('org-mine', 3);
    const theirs = ids('org-theirs', 3);
    const write = (org: string, e: string) => runWrite(t.db.knex, settings, { orgId: org, requestId: `req_${e}` }, async (trx) => ({
      status: 201, body: await createLog(trx, org, { entityType: 'checkin', entityId: e, entryType: 'comment', message: e, source: 'api' }),
    }));
    await Promise.all([...mine.map((e) => write(orgId, e)), ...theirs.map((e) => write(other, e))]);
    const xmins = await writers([...mine, ...theirs]);
    expect(new Set(mine.map((e) => xmins[e])).size).toBe(1);
    expect(new Set(theirs.map((e) => xmins[e])).size).toBe(1);
    expect(xmins[mine[0]]).not.toBe(xmins[theirs[0]]);
  });

  itOnPostgres('a write that changed nothing and fails (a 404) leaves the batch: the others commit together, nothing runs twice', async () => {
    const entities = ids('clean', 3);
    const writes = entities.map((e) => logWrite(e));
    let failingRuns = 0;
    const failing = runWrite(t.db.knex, settings, { orgId, requestId: 'req_404' }, async () => {
      failingRuns++;
      throw new ApiError('NOT_FOUND', 'No such thing');
    });
    const results = await Promise.allSettled([failing, ...writes.map((w, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_c${i}` }, w.work))]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { code: 'NOT_FOUND' } });
    expect(results.slice(1).map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect({ failingRuns, runs: writes.map((w) => w.ran.count) }).toEqual({ failingRuns: 1, runs: [1, 1, 1] });
    expect(new Set(Object.values(await writers(entities))).size).toBe(1);
  });

  itOnPostgres('a write that fails after writing rolls the batch back; every write of it runs again alone, and only the failing one fails', async () => {
    const entities = ids('rerun', 3);
    const writes = entities.map((e) => logWrite(e));
    const failing = logWrite('rerun-failing', async () => {
      throw new ApiError('INVALID_TRANSITION', 'refused after the write');
    });
    const held = heldConnections();
    const results = await Promise.allSettled([failing, ...writes].map((w, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_r${i}` }, w.work))).finally(() => held.restore());
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { code: 'INVALID_TRANSITION' } });
    // run again one after the other, each waiting for the one before before it takes a connection
    expect(held.most()).toBe(1);
    expect(results.slice(1).map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    // once in the batch, once alone
    expect([failing, ...writes].map((w) => w.ran.count)).toEqual([2, 2, 2, 2]);
    const xmins = await writers([...entities, 'rerun-failing']);
    expect(Object.keys(xmins).sort()).toEqual([...entities].sort());
    // alone: a transaction each
    expect(new Set(Object.values(xmins)).size).toBe(3);
    const bodies = results.slice(1).map((r) => (r as PromiseFulfilledResult<{ reply: Reply }>).value.reply.body as { id: string });
    expect(await t.db.knex('events').whereIn('resource_id', bodies.map((b) => b.id)).select('type')).toHaveLength(3);
  });

  itOnPostgres('two writes of one turn that change the same row run one after the other: each answers and records its own change, never the other\'s', async () => {
    // the members of a batch share one transaction, whose row locks do not keep them apart: a
    // second update reading the site between the first one's statements built its answer, its
    // event and its changedFields on the first one's change (storage/pgGroupCommit.ts, rowLockedBy)
    for (const key of [undefined, 'same-row']) {
      const site = await createSiteAlone(`Shared ${key ?? 'unkeyed'}`);
      const changes = [{ name: `Renamed ${key ?? 'unkeyed'}` }, { address: '1 Grid Road' }, { geofenceRadiusMeters: 777 }];
      const results = await Promise.all(changes.map((change, i) => runWrite(t.db.knex, settings, {
        orgId, requestId: `req_row${i}`, ...(key ? { keyed: { apiKeyId: keyId, key: `${key}-${i}`, fingerprint: fingerprint('PATCH', `/v1/sites/${site.id}`, change) } } : {}),
      }, async (trx) => ({ status: 200, body: await updateSite(trx, orgId, site.id, change) }))));
      const events = await t.db.knex('events').where({ resource_id: site.id, type: 'site.updated' }).orderBy('seq').select('data', 'changed_fields');
      // each event names the one field its write changed, and its data is the site right after it
      expect(events.map((e) => JSON.parse(e.changed_fields)).sort()).toEqual([['address'], ['geofenceRadiusMeters'], ['name']]);
      let state = site as Record<string, unknown>;
      for (const event of events) {
        const data = JSON.parse(event.data);
        const [field] = JSON.parse(event.changed_fields) as string[];
        expect({ ...data, updatedAt: undefined }).toEqual({ ...state, [field]: data[field], updatedAt: undefined });
        state = data;
      }
      // each answer is the state after its own write: what its event carries
      for (const [i, result] of results.entries()) {
        const body = result.reply.body as Record<string, unknown>;
        const [field, value] = Object.entries(changes[i])[0];
        expect(body[field]).toBe(value);
        expect(events.map((e) => JSON.parse(e.data))).toContainEqual(body);
      }
    }
  });

  itOnPostgres('one Idempotency-Key sent twice in one turn with different bodies: the second answers IDEMPOTENCY_IN_PROGRESS, as from another process', async () => {
    // the two share a batch, and so the key's lock: the second saw the first one's claim row
    // and compared bodies at once (IDEMPOTENCY_KEY_REUSED), while the first could still fail
    const send = (name: string) => runWrite(t.db.knex, settings, {
      orgId, requestId: `req_same_key_${name}`, keyed: { apiKeyId: keyId, key: 'same-turn-other-body', fingerprint: fingerprint('POST', '/v1/sites', { name }) },
    }, async (trx) => ({ status: 201, body: await createSite(trx, orgId, { name, geofenceRadiusMeters: 150 }) }));
    const results = await Promise.allSettled([send('First body'), send('Second body')]);
    expect(results.map(outcome)).toEqual([201, 'IDEMPOTENCY_IN_PROGRESS']);
    // once the first has finished, the other body is refused for good
    const after = await send('Second body').then((r) => r.reply.status, (err: ApiError) => err.code);
    expect(after).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  itOnPostgres('reads that lock different rows without selecting their id are no conflict: the writes share their batch, each run once', async () => {
    // rows are told apart by their id (storage/lentKnex.ts); a read selecting none registers nothing,
    // where every such row once counted as one and the same, and rolled the batch back for nothing
    const sites = [await createSiteAlone('Locked without id 0'), await createSiteAlone('Locked without id 1')];
    const writes = sites.map((site, i) => logWrite(`no-id-${i}`, async (trx) => {
      await trx('sites').where({ org_id: orgId, id: site.id }).first('name').forUpdate();
    }));
    const results = await Promise.all(writes.map((w, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_noid${i}` }, w.work)));
    expect(results.map((r) => r.reply.status)).toEqual([201, 201]);
    expect(writes.map((w) => w.ran.count)).toEqual([1, 1]);
    expect(new Set(Object.values(await writers(['no-id-0', 'no-id-1']))).size).toBe(1);
  });

  itOnPostgres('two check-ins of one user in one turn each refresh the profile in turn: the last location names the check-in that moved it', async () => {
    const userId = 'auth0|same-turn';
    await runWrite(t.db.knex, settings, { orgId, requestId: 'req_user' }, async (trx) => ({ status: 201, body: await createUser(trx, orgId, { userId }) }));
    const visits = await Promise.all([0, 1].map((i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_visit${i}` }, async (trx) => ({
      status: 201, body: await createCheckin(trx, orgId, { userId, siteId: 'site_same_turn', status: 'active', coordinates: { latitude: 53.8 + i / 100, longitude: -1.55 } }),
    }))));
    const ids = visits.map((v) => (v.reply.body as { id: string }).id);
    const moves = (await t.db.knex('events').where({ type: 'user.updated' }).orderBy('seq').select('data'))
      .map((e) => JSON.parse(e.data)).filter((u) => u.userId === userId).map((u) => u.lastLocationCheckinId);
    // one profile move per check-in, each naming its own, in the order they committed
    expect([...moves].sort()).toEqual([...ids].sort());
  });

  itOnPostgres('a statement that fails (a duplicate id) fails its own write only, with its own error', async () => {
    const first = await runWrite(t.db.knex, settings, { orgId, requestId: 'req_dup0' }, logWrite('dup-original').work);
    const existing = await t.db.knex('logs').where({ id: (first.reply.body as { id: string }).id }).first();
    const writes = ids('dup-other', 2).map((e) => logWrite(e));
    let duplicateRuns = 0;
    const duplicate = async (trx: Knex): Promise<Reply> => {
      duplicateRuns++;
      await trx('logs').insert({ ...existing, seq: undefined });
      return { status: 201 };
    };
    const results = await Promise.allSettled([
      runWrite(t.db.knex, settings, { orgId, requestId: 'req_dup' }, duplicate),
      ...writes.map((w, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_d${i}` }, w.work)),
    ]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { code: '23505' } });
    expect(results.slice(1).map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(duplicateRuns).toBe(2);
    expect(Object.keys(await writers(ids('dup-other', 2))).sort()).toEqual(ids('dup-other', 2));
  });

  itOnPostgres('with an Idempotency-Key: an operation refused after its write stores its 4xx, a duplicate in the same batch is refused as in progress, and the others commit', async () => {
    const key = (k: string, e: string) => ({ apiKeyId: keyId, key: k, fingerprint: fingerprint('post', '/v1/logs', { e }) });
    const refused = logWrite('keyed-refused', async () => {
      throw new ApiError('INVALID_TRANSITION', 'refused after the write');
    });
    const ok = logWrite('keyed-ok');
    const dup = logWrite('keyed-ok');
    const results = await Promise.allSettled([
      runWrite(t.db.knex, settings, { orgId, keyed: key('gc-refused', 'r'), requestId: 'req_k1' }, refused.work),
      runWrite(t.db.knex, settings, { orgId, keyed: key('gc-ok', 'o'), requestId: 'req_k2' }, ok.work),
      runWrite(t.db.knex, settings, { orgId, keyed: key('gc-ok', 'o'), requestId: 'req_k3' }, dup.work),
    ]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { code: 'INVALID_TRANSITION' } });
    // the batch rolled back, and the two requests with one key ran again alone: whichever claimed
    // the key first ran; the other was refused while it ran, or replayed its answer after
    const won = results.findIndex((r, i) => i > 0 && r.status === 'fulfilled' && !r.value.replayed);
    expect(won).toBeGreaterThan(0);
    expect(results[won]).toMatchObject({ status: 'fulfilled', value: { replayed: false, reply: { status: 201 } } });
    const wonBody = (results[won] as PromiseFulfilledResult<{ reply: Reply }>).value.reply.body;
    const lost = results[3 - won];
    if (lost.status === 'rejected') expect(lost.reason).toMatchObject({ code: 'IDEMPOTENCY_IN_PROGRESS' });
    else expect(lost.value).toMatchObject({ replayed: true, reply: { status: 201, body: wonBody } });
    expect(ok.ran.count + dup.ran.count).toBe(2); // once in the batch, once alone, for the two of them
    // the refusal was stored: a retry replays it without running the operation
    const retry = logWrite('keyed-refused');
    const replay = await runWrite(t.db.knex, settings, { orgId, keyed: key('gc-refused', 'r'), requestId: 'req_k4' }, retry.work);
    expect(replay).toMatchObject({ replayed: true, reply: { status: 409, body: { code: 'INVALID_TRANSITION' } } });
    expect(retry.ran.count).toBe(0);
    expect(Object.keys(await writers(['keyed-refused', 'keyed-ok']))).toEqual(['keyed-ok']);
    const again = await runWrite(t.db.knex, settings, { orgId, keyed: key('gc-ok', 'o'), requestId: 'req_k5' }, logWrite('keyed-ok').work);
    expect(again).toMatchObject({ replayed: true, reply: { status: 201, body: wonBody } });
  });

  itOnPostgres('with an Idempotency-Key: two requests with one key in the same batch run once, the other is refused as in progress, and nothing runs twice', async () => {
    const key = { apiKeyId: keyId, key: 'gc-twice', fingerprint: fingerprint('post', '/v1/logs', { e: 'twice' }) };
    const writes = [logWrite('twice'), logWrite('twice'), logWrite('twice-other')];
    const results = await Promise.allSettled([
      runWrite(t.db.knex, settings, { orgId, keyed: key, requestId: 'req_t1' }, writes[0].work),
      runWrite(t.db.knex, settings, { orgId, keyed: key, requestId: 'req_t2' }, writes[1].work),
      runWrite(t.db.knex, settings, { orgId, requestId: 'req_t3' }, writes[2].work),
    ]);
    expect(results[0]).toMatchObject({ status: 'fulfilled', value: { replayed: false, reply: { status: 201 } } });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: { code: 'IDEMPOTENCY_IN_PROGRESS' } });
    expect(results[2]).toMatchObject({ status: 'fulfilled' });
    expect(writes.map((w) => w.ran.count)).toEqual([1, 0, 1]);
    const xmins = await writers(['twice', 'twice-other']);
    expect(Object.keys(xmins).sort()).toEqual(['twice', 'twice-other']);
    expect(xmins.twice).toBe(xmins['twice-other']);
  });

  itOnPostgres('a batch whose connection is lost before its COMMIT fails every write of it, and runs none of them again', async () => {
    const writes = ids('lost', 2).map((e) => logWrite(e));
    const cut = logWrite('lost-cut', async (trx) => {
      const { rows } = await trx.raw('select pg_backend_pid() as pid');
      await t.db.knex.raw('select pg_terminate_backend(?)', [rows[0].pid]);
      for (let i = 0; i < 100; i++) {
        const { rows: alive } = await t.db.knex.raw('select 1 from pg_stat_activity where pid = ?', [rows[0].pid]);
        if (!alive.length) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });
    const results = await Promise.allSettled([cut, ...writes].map((w, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_l${i}` }, w.work)));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    // each is told the database is unavailable (a 503 to retry with its key), never a bare error (a 500)
    expect(results.map((r) => isDatabaseUnavailable((r as PromiseRejectedResult).reason))).toEqual([true, true, true]);
    expect([cut, ...writes].map((w) => w.ran.count)).toEqual([1, 1, 1]);
    expect(await writers(['lost-cut', ...ids('lost', 2)])).toEqual({});
    // the pool replaced the lost connection: the next write commits
    expect((await runWrite(t.db.knex, settings, { orgId, requestId: 'req_l_after' }, logWrite('lost-after').work)).reply.status).toBe(201);
  });

  itOnPostgres('a batch that failed and lost its connection before its ROLLBACK tells the other writes the database is unavailable (503), not a bare error (500)', async () => {
    const writes = ids('lost-failed', 2).map((e) => logWrite(e));
    const failing = logWrite('lost-failed-cut', async (trx) => {
      const { rows } = await trx.raw('select pg_backend_pid() as pid');
      await t.db.knex.raw('select pg_terminate_backend(?)', [rows[0].pid]);
      throw new ApiError('INVALID_TRANSITION', 'refused after the write, the connection gone meanwhile');
    });
    const results = await Promise.allSettled([failing, ...writes].map((w, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_lf${i}` }, w.work)));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(results.slice(1).map((r) => isDatabaseUnavailable((r as PromiseRejectedResult).reason))).toEqual([true, true]);
    expect(await writers(['lost-failed-cut', ...ids('lost-failed', 2)])).toEqual({});
  });

  itOnPostgres("a write's statement through Knex, written on the shared connection behind another write's statements that wait in the socket's buffer, is answered", async () => {
    // the members' statements interleave on one connection: the buffer must go out even when the
    // statement that waits is not one of runtime/storage/pgPipeline.ts
    const first = await runWrite(t.db.knex, settings, { orgId, requestId: 'req_x' }, logWrite('buffered-model').work);
    const model = await t.db.knex('logs').where({ id: (first.reply.body as { id: string }).id }).first();
    const results = await Promise.all([
      runWrite(t.db.knex, settings, { orgId, requestId: 'req_x0' }, async (trx) => {
        await trx('logs').insert({ ...model, id: 'log_buffered_by_knex', entity_id: 'buffered-knex', seq: undefined });
        return { status: 201 };
      }),
      ...ids('buffered', 2).map((e, i) => runWrite(t.db.knex, settings, { orgId, requestId: `req_x${i + 1}` }, logWrite(e).work)),
    ]);
    expect(results.map((r) => r.reply.status)).toEqual([201, 201, 201]);
    expect(Object.keys(await writers(['buffered-knex', ...ids('buffered', 2)])).sort()).toEqual(['buffered-0', 'buffered-1', 'buffered-knex']);
  });

  itOnPostgres("a write with a prepare step (it waits on the network) runs in a transaction of its own, and takes the organization's write lock after that step, with its first write", async () => {
    const writesLockHeld = async (db: Knex, ownOnly: boolean) => (await db.raw(
      `select 1 from pg_locks where locktype = 'advisory' and granted and classid::int = hashtext('writes') and objid::int = hashtext(?)${ownOnly ? ' and pid = pg_backend_pid()' : ''}`,
      [orgId],
    )).rows.length > 0;
    const seen: Record<string, boolean> = {};
    const batched = logWrite('prepared-neighbour');
    const [prepared] = await Promise.all([
      runWrite(t.db.knex, settings, { orgId, requestId: 'req_p1' }, async (trx) => {
        seen.beforeWrite = await writesLockHeld(trx, true);
        const log = await createLog(trx, orgId, { entityType: 'checkin', entityId: 'prepared', entryType: 'comment', message: 'p', source: 'api' });
        seen.afterWrite = await writesLockHeld(trx, true);
        return { status: 201, body: log };
      }, async () => {
        await new Promise((resolve) => setTimeout(resolve, 20)); // the network
        seen.inPrepare = await writesLockHeld(t.db.knex, false);
      }),
      runWrite(t.db.knex, settings, { orgId, requestId: 'req_p2' }, batched.work),
    ]);
    expect(prepared.reply.status).toBe(201);
    expect(seen).toEqual({ inPrepare: false, beforeWrite: false, afterWrite: true });
    const xmins = await writers(['prepared', 'prepared-neighbour']);
    expect(xmins.prepared).toBeDefined();
    expect(xmins.prepared).not.toBe(xmins['prepared-neighbour']);
  });

  itOnPostgres("two processes' batches of one organization never deadlock: the second waits behind the organization's write lock before it takes any other", async () => {
    // Without that lock: X takes the logs' and events' locks, Y the sites' lock and waits for the
    // logs', X then wants the sites' lock — a deadlock, which Postgres breaks after a second by
    // failing one of them (and its writes run again). With it, Y takes nothing before X commits.
    const second = t.db.openAnother();
    try {
      const before = await deadlocks();
      const { gate, openGate } = aGate();
      const runs = { x: 0, y: 0 };
      const x = runWrite(t.db.knex, settings, { orgId, requestId: 'req_lock_x' }, async (trx) => {
        runs.x++;
        await createLog(trx, orgId, { entityType: 'checkin', entityId: 'lock-x', entryType: 'comment', message: 'x', source: 'api' });
        await gate;
        return { status: 201, body: await createSite(trx, orgId, { name: 'lock-x', geofenceRadiusMeters: 100 }) };
      });
      // X holds its locks (its log's event is in) before Y begins
      for (let i = 0; i < 200 && !(await someoneHolds(t.db.knex, 'events')); i++) await new Promise((resolve) => setTimeout(resolve, 25));
      const y = runWrite(second.knex, settings, { orgId, requestId: 'req_lock_y' }, async (trx) => {
        runs.y++;
        await createSite(trx, orgId, { name: 'lock-y', geofenceRadiusMeters: 100 });
        return { status: 201, body: await createLog(trx, orgId, { entityType: 'checkin', entityId: 'lock-y', entryType: 'comment', message: 'y', source: 'api' }) };
      });
      // Y is waiting for a lock X holds
      for (let i = 0; i < 200 && !(await someoneWaits(t.db.knex)); i++) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(await someoneWaits(t.db.knex)).toBe(true);
      openGate();
      const results = await Promise.all([x, y]);
      expect(results.map((r) => r.reply.status)).toEqual([201, 201]);
      expect(runs).toEqual({ x: 1, y: 1 });
      expect(await deadlocks()).toBe(before);
    } finally {
      await second.close();
    }
  });

  /** Runs `test` while another transaction holds the sites table locked (rolled back after it). */
  async function whileSitesLocked(test: () => Promise<void>): Promise<void> {
    const holder = await t.db.knex.transaction();
    try {
      await holder.raw('lock table sites in access exclusive mode');
      await test();
    } finally {
      await holder.rollback();
    }
  }
  /** A site insert that waits behind that lock until Postgres gives it up (statement_timeout 300 ms); `tried` is told before it goes out. */
  async function siteBehindTheLock(trx: Knex, name: string, tried: () => void = () => undefined): Promise<Reply> {
    await trx.raw("set local statement_timeout = '300ms'");
    tried();
    return { status: 201, body: await createSite(trx, orgId, { name, geofenceRadiusMeters: 150 }) };
  }

  itOnPostgres('a batch with a statement Postgres gave up on after waiting (statement_timeout) is not run again: each member answers that error at once', async () => {
    // run again, each write waited as long again, one after the other: a 503 after twice
    // DATABASE_QUERY_TIMEOUT_SECONDS, or a write that succeeded after its client had given up
    await whileSitesLocked(async () => {
      const runs = { site: 0, log: 0 };
      const site = runWrite(t.db.knex, settings, { orgId, requestId: 'req_waited_site' }, async (trx) => {
        runs.site++;
        return siteBehindTheLock(trx, 'Behind a lock');
      });
      const log = runWrite(t.db.knex, settings, { orgId, requestId: 'req_waited_log' }, logWrite('waited-log', async () => { runs.log++; }).work);
      expect((await Promise.allSettled([site, log])).map(outcome)).toEqual(['57014', '57014']);
      expect(runs).toEqual({ site: 1, log: 1 });
      expect(await t.db.knex('logs').where({ entity_id: 'waited-log' }).first()).toBeUndefined();
    });
  });

  itOnPostgres('the writes of a rolled-back batch run again one by one: once one of them waited out a lock held elsewhere, the rest answer its 503 without waiting again', async () => {
    // each run again waited as long, one after the other: the last answered after as many timeouts as the batch had writes
    await whileSitesLocked(async () => {
      let sitesTried = 0;
      const work = (name: string, failFirst: boolean) => {
        let run = 0;
        return async (trx: Knex): Promise<Reply> => {
          run++;
          if (run === 1) {
            // in the shared batch: a log each, and one write then refused after it (the batch rolls back)
            await createLog(trx, orgId, { entityType: 'checkin', entityId: `chain-${name}`, entryType: 'comment', message: name, source: 'api' });
            if (failFirst) throw new ApiError('INVALID_TRANSITION', 'refused after the write');
            return { status: 201 };
          }
          // run again alone: behind the lock held elsewhere
          return siteBehindTheLock(trx, `Behind a lock ${name}`, () => { sitesTried++; });
        };
      };
      const results = await Promise.allSettled([
        runWrite(t.db.knex, settings, { orgId, requestId: 'req_chain_a' }, work('a', true)),
        runWrite(t.db.knex, settings, { orgId, requestId: 'req_chain_b' }, work('b', false)),
      ]);
      expect(results.map(outcome)).toEqual(['57014', '57014']);
      expect(sitesTried).toBe(1);
    });
  });

  itOnPostgres("a read that locks a row (an update's first step) also waits behind the organization's write lock: two processes updating one site never deadlock", async () => {
    // Y's first statement reads the site FOR UPDATE. Taken before the organization's write lock,
    // that row lock was held while Y waited for X's batch, and X's update of the same site then
    // waited for Y: a deadlock, whose victim's batch answered 503 and the rest 500
    const site = await createSiteAlone('Locked by reads');
    const second = t.db.openAnother();
    try {
      const before = await deadlocks();
      const { gate, openGate } = aGate();
      const x = runWrite(t.db.knex, settings, { orgId, requestId: 'req_read_lock_x' }, async (trx) => {
        await createLog(trx, orgId, { entityType: 'checkin', entityId: 'read-lock-x', entryType: 'comment', message: 'x', source: 'api' });
        await gate;
        return { status: 200, body: await updateSite(trx, orgId, site.id, { address: 'by x' }) };
      });
      for (let i = 0; i < 200 && !(await someoneHolds(t.db.knex, 'events')); i++) await new Promise((resolve) => setTimeout(resolve, 25));
      const y = runWrite(second.knex, settings, { orgId, requestId: 'req_read_lock_y' }, async (trx) => ({
        status: 200, body: await updateSite(trx, orgId, site.id, { name: 'by y' }),
      }));
      for (let i = 0; i < 200 && !(await someoneWaits(t.db.knex)); i++) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(await someoneWaits(t.db.knex)).toBe(true);
      // Y waits holding nothing of the site: another transaction may lock its row at once
      const probe = await t.db.knex.transaction((trx) => trx.raw('select id from sites where id = ? for update nowait', [site.id])).then(() => 'row free', (err: Error) => err.message);
      openGate();
      const results = await Promise.allSettled([x, y]);
      expect(probe).toBe('row free');
      expect(results.map((r) => (r.status === 'fulfilled' ? r.value.reply.status : String(r.reason)))).toEqual([200, 200]);
      expect(await deadlocks()).toBe(before);
      expect(await t.db.knex('sites').where({ id: site.id }).first('name', 'address')).toEqual({ name: 'by y', address: 'by x' });
    } finally {
      await second.close();
    }
  });
});

describeEachDatabase('Postgres: writes that race on the rows they read', (t) => {
  const itOnPostgres = t.kind === 'postgres' ? it : it.skip;
  let orgId: string;

  beforeAll(async () => {
    ({ orgId } = await authenticate(t.db.knex, t.auth));
  });

  /** Runs `work` as one write request of the organization through `db` (a handle of this process, or of another). */
  const write = (db: Knex, requestId: string, work: (trx: Knex) => Promise<unknown>) =>
    runWrite(db, settings, { orgId, requestId }, async (trx) => ({ status: 200, body: await work(trx) }));
  const eventsOf = async (resourceId: string) => (await t.db.knex('events').where({ resource_id: resourceId }).orderBy('seq').select('type')).map((e) => e.type);

  /** A write on `db` that takes the organization's write lock, then waits for the test before it goes on and commits. */
  async function holdingTheLock(db: Knex, requestId: string, then: (trx: Knex) => Promise<unknown>) {
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => { openGate = resolve; });
    const done = write(db, requestId, async (trx) => {
      await createLog(trx, orgId, { entityType: 'checkin', entityId: requestId, entryType: 'comment', message: 'holds the lock', source: 'api' });
      await gate;
      return then(trx);
    });
    for (let i = 0; i < 200 && !(await someoneHolds(t.db.knex, 'events')); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    return { done, openGate };
  }

  /** A promise (`fired`) that settles once `fire` is called. */
  function aSignal(): { fired: Promise<void>; fire: () => void } {
    let fire!: () => void;
    const fired = new Promise<void>((resolve) => { fire = resolve; });
    return { fired, fire };
  }

  /** Until a write of another handle waits for the organization's write lock. */
  async function untilWaiting(): Promise<void> {
    for (let i = 0; i < 200 && !(await someoneWaits(t.db.knex)); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(await someoneWaits(t.db.knex)).toBe(true);
  }

  itOnPostgres('an update and a delete of one template in one turn: never an update answered or recorded after the delete', async () => {
    // The two share a batch. The delete changed the row without reading it locked, so the batch
    // could not tell the two apart; the update then wrote the deleted template, answered 200 and
    // recorded template.updated after template.deleted (storage/pgGroupCommit.ts, rowLockedBy)
    for (const order of ['update first', 'delete first']) {
      const template = (await write(t.db.knex, 'req_tpl', (trx) => createTemplate(trx, orgId, { name: `Raced ${order}`, items: [{ id: 'a', label: 'A', type: 'yes_no', required: true }] }))).reply.body as { id: string };
      const update = () => write(t.db.knex, 'req_tpl_update', (trx) => updateTemplate(trx, orgId, template.id, { name: 'Renamed' }));
      const remove = () => write(t.db.knex, 'req_tpl_delete', (trx) => deleteTemplate(trx, orgId, template.id));
      const [updated, deleted] = order === 'update first'
        ? await Promise.allSettled([update(), remove()])
        : (await Promise.allSettled([remove(), update()])).reverse();
      expect(outcome(deleted)).toBe(200);
      const events = await eventsOf(template.id);
      // whichever ran first, the feed ends with the delete, and an update answered 200 is recorded before it
      expect(events[events.length - 1]).toBe('template.deleted');
      expect(events).toEqual(outcome(updated) === 200 ? ['template.created', 'template.updated', 'template.deleted'] : ['template.created', 'template.deleted']);
      expect(outcome(updated) === 200 || outcome(updated) === 'NOT_FOUND').toBe(true);
    }
  });

  itOnPostgres('creates naming one site in one turn share their batch', async () => {
    // a create locks the site it names shared (it must stay live until the create commits): many
    // creates on one site go together, where exclusive locks would run them again one by one
    const site = (await write(t.db.knex, 'req_shared_site', (trx) => createSite(trx, orgId, { name: 'Shared by creates', geofenceRadiusMeters: 150 }))).reply.body as { id: string };
    const runs = { create: 0 };
    const create = (i: number) => write(t.db.knex, `req_shared_asset${i}`, (trx) => {
      runs.create++;
      return createAsset(trx, orgId, { name: `On the site ${i}`, siteId: site.id, status: 'active', attributes: {} });
    });
    const together = await Promise.allSettled([create(0), create(1), create(2)]);
    expect(together.map(outcome)).toEqual([200, 200, 200]);
    expect(runs.create).toBe(3); // no batch rolled back and ran again
    const ids = together.map((r) => ((r as PromiseFulfilledResult<{ reply: Reply }>).value.reply.body as { id: string }).id);
    expect(new Set((await t.db.knex('assets').whereIn('id', ids).select(t.db.knex.raw('xmin::text as xmin'))).map((r) => r.xmin)).size).toBe(1);
  });

  itOnPostgres('a member refused after its checks leaves its batch without its locks: a later update of a row it checked keeps the batch', async () => {
    // the refused create locked the site it names (shared), then left having written nothing; its
    // entry stayed, and the update's exclusive read of that site rolled the batch back: every
    // request of it ran twice
    const site = (await write(t.db.knex, 'req_left_site', (trx) => createSite(trx, orgId, { name: 'Checked, then left', geofenceRadiusMeters: 150 }))).reply.body as { id: string };
    const template = (await write(t.db.knex, 'req_left_tpl', (trx) => createTemplate(trx, orgId, { name: 'Checked too', items: [{ id: 'a', label: 'A', type: 'yes_no', required: true }] }))).reply.body as { id: string };
    const left = aSignal();
    const runs = { create: 0, update: 0 };
    const results = await Promise.allSettled([
      write(t.db.knex, 'req_left_create', async (trx) => {
        runs.create++;
        try {
          return await createRun(trx, orgId, { templateId: template.id, siteId: site.id, userId: 'auth0|left', assetId: 'ast_missing' });
        } finally {
          left.fire();
        }
      }),
      write(t.db.knex, 'req_left_update', async (trx) => {
        runs.update++;
        await left.fired;
        await new Promise((resolve) => setImmediate(resolve)); // the refused member has left
        return updateSite(trx, orgId, site.id, { name: 'Updated after the refusal' });
      }),
    ]);
    expect(results.map(outcome)).toEqual(['VALIDATION_ERROR', 200]);
    expect(runs).toEqual({ create: 1, update: 1 });
  });

  itOnPostgres("a create and a delete of the site it names, in one turn: the delete's event never comes before the create's", async () => {
    // the delete runs between the create's check of the site and its insert; it deleted the row
    // without reading it locked, so the batch could not tell the two apart, and the feed read
    // site.deleted, then asset.created naming the site (storage/pgGroupCommit.ts, rowLockedBy)
    const site = (await write(t.db.knex, 'req_between_site', (trx) => createSite(trx, orgId, { name: 'Deleted between', geofenceRadiusMeters: 150 }))).reply.body as { id: string };
    const read = aSignal();
    const deleted = aSignal();
    // the create's insert waits, after its check of the site, until the delete has run
    const insert = assetsRepository.insertAsset;
    const spy = jest.spyOn(assetsRepository, 'insertAsset').mockImplementation(async (...args) => {
      read.fire();
      await deleted.fired;
      return insert(...args);
    });
    try {
      const results = await Promise.allSettled([
        write(t.db.knex, 'req_between_create', (trx) => createAsset(trx, orgId, { name: 'Between', siteId: site.id, status: 'active', attributes: {} })),
        write(t.db.knex, 'req_between_delete', async (trx) => {
          await read.fired;
          try {
            return await deleteSite(trx, orgId, site.id);
          } finally {
            deleted.fire();
          }
        }),
      ]);
      // either order is a serial one: the create first (201, then the delete), or the delete
      // first (the create refused: its site is gone); never the create recorded after the delete
      const [created, removed] = results.map(outcome);
      expect(removed).toBe(200);
      expect(await eventsOf(site.id)).toEqual(['site.created', 'site.deleted']);
      const assetEvents = (await t.db.knex('events').where({ type: 'asset.created' }).orderBy('seq').select('seq', 'data')).filter((e) => JSON.parse(e.data).siteId === site.id);
      const gone = await t.db.knex('events').where({ resource_id: site.id, type: 'site.deleted' }).first('seq');
      if (created === 200) {
        expect(assetEvents).toHaveLength(1);
        expect(Number(assetEvents[0].seq)).toBeLessThan(Number(gone.seq));
      } else {
        expect([created, assetEvents]).toEqual(['VALIDATION_ERROR', []]);
      }
    } finally {
      spy.mockRestore();
    }
  });

  itOnPostgres("check-ins that only read their user's profile for the verdict share their batch", async () => {
    // a position reported without an activation reads the profile's last location for the
    // geofence verdict and changes nothing of it: a shared lock, where an exclusive one rolled the
    // batch back and ran both again
    const userId = 'auth0|verdicts-together';
    await write(t.db.knex, 'req_verdict_user', (trx) => createUser(trx, orgId, { userId }));
    const checkins = await Promise.all([0, 1].map(async (i) => (await write(t.db.knex, `req_verdict_checkin${i}`, (trx) =>
      createCheckin(trx, orgId, { userId, siteId: 'site_verdicts', status: 'active', coordinates: { latitude: 53.8, longitude: -1.55 } }))).reply.body as { id: string }));
    const runs = [0, 0];
    const results = await Promise.allSettled(checkins.map((checkin, i) => write(t.db.knex, `req_verdict_move${i}`, (trx) => {
      runs[i]++;
      return updateCheckin(trx, orgId, checkin.id, { coordinates: { latitude: 53.81 + i / 100, longitude: -1.55 } });
    })));
    expect(results.map(outcome)).toEqual([200, 200]);
    expect(runs).toEqual([1, 1]);
  });

  itOnPostgres('a create naming a site that another process deletes meanwhile: refused, never recorded after the delete', async () => {
    // The create read the site before it waited for the organization's write lock; the delete
    // committed meanwhile, and the asset was created naming it, after site.deleted in the feed
    const site = (await write(t.db.knex, 'req_ref_site', (trx) => createSite(trx, orgId, { name: 'Deleted meanwhile', geofenceRadiusMeters: 150 }))).reply.body as { id: string };
    const second = t.db.openAnother();
    try {
      const x = await holdingTheLock(t.db.knex, 'req_ref_delete', (trx) => deleteSite(trx, orgId, site.id));
      const y = write(second.knex, 'req_ref_create', (trx) => createAsset(trx, orgId, { name: 'Names the site', siteId: site.id, status: 'active', attributes: {} }));
      await untilWaiting();
      x.openGate();
      const [deleted, created] = await Promise.allSettled([x.done, y]);
      expect([outcome(deleted), outcome(created)]).toEqual([200, 'VALIDATION_ERROR']);
      const assets = (await t.db.knex('events').where({ type: 'asset.created' }).select('data')).map((e) => JSON.parse(e.data));
      expect(assets.filter((a) => a.siteId === site.id)).toEqual([]);
    } finally {
      await second.close();
    }
  });

  itOnPostgres('an activation committed after the profile was created, by another process, refreshes it', async () => {
    // The check-in read the profile before it waited for the organization's write lock, found
    // none, and left the profile that committed meanwhile without its last location
    const userId = 'auth0|created-meanwhile';
    const second = t.db.openAnother();
    try {
      const x = await holdingTheLock(t.db.knex, 'req_profile_create', (trx) => createUser(trx, orgId, { userId }));
      const y = write(second.knex, 'req_profile_visit', (trx) => createCheckin(trx, orgId, { userId, siteId: 'site_meanwhile', status: 'active', coordinates: { latitude: 53.8, longitude: -1.55 } }));
      await untilWaiting();
      x.openGate();
      const [created, visited] = await Promise.allSettled([x.done, y]);
      expect([outcome(created), outcome(visited)]).toEqual([200, 200]);
      const checkin = (visited as PromiseFulfilledResult<{ reply: Reply }>).value.reply.body as { id: string };
      expect(await t.db.knex('users').where({ org_id: orgId, user_id: userId }).first('last_location_checkin_id')).toEqual({ last_location_checkin_id: checkin.id });
    } finally {
      await second.close();
    }
  });

  itOnPostgres("a check-in's time is taken after the writes before it: its refresh never moves the last location or updatedAt back", async () => {
    // The check-in took its time before it waited for the organization's write lock. A PATCH of
    // the profile that committed meanwhile set a later location, and the check-in's refresh then
    // replaced it with its earlier one, moving the profile's updatedAt back
    const userId = 'auth0|moved-meanwhile';
    const profile = (await write(t.db.knex, 'req_moved_user', (trx) => createUser(trx, orgId, { userId }))).reply.body as { id: string };
    const second = t.db.openAnother();
    try {
      const x = await holdingTheLock(t.db.knex, 'req_moved_patch', (trx) => updateUser(trx, orgId, profile.id, {
        lastLocationLat: 51.5, lastLocationLng: -0.12, lastLocationSource: 'manual', lastLocationCapturedAt: new Date().toISOString(),
      }));
      const y = write(second.knex, 'req_moved_visit', (trx) => createCheckin(trx, orgId, { userId, siteId: 'site_moved', status: 'active', coordinates: { latitude: 53.8, longitude: -1.55 } }));
      await untilWaiting();
      await new Promise((resolve) => setTimeout(resolve, 20)); // the PATCH's time is later than the check-in's start
      x.openGate();
      const [patched, visited] = await Promise.allSettled([x.done, y]);
      expect([outcome(patched), outcome(visited)]).toEqual([200, 200]);
      const checkin = (visited as PromiseFulfilledResult<{ reply: Reply }>).value.reply.body as { id: string };
      // the check-in came last, so its location is the last one
      expect(await t.db.knex('users').where({ id: profile.id }).first('last_location_checkin_id')).toEqual({ last_location_checkin_id: checkin.id });
      const times = (await t.db.knex('events').where({ resource_id: profile.id, type: 'user.updated' }).orderBy('seq').select('data'))
        .map((e) => JSON.parse(e.data) as { updatedAt: string; lastLocationCapturedAt: string });
      expect(times).toHaveLength(2);
      // not back in time (the same millisecond may be read twice on a fast machine)
      expect(times[1].updatedAt >= times[0].updatedAt && times[1].lastLocationCapturedAt >= times[0].lastLocationCapturedAt).toBe(true);
    } finally {
      await second.close();
    }
  });
});

/** Whether some backend holds an advisory lock whose first key is `name`'s (a table's inserts, storage/orderedInsert.ts, or the events'). */
async function someoneHolds(db: Knex, name: string): Promise<boolean> {
  const { rows } = await db.raw(`select 1 from pg_locks where locktype = 'advisory' and granted and classid::int = hashtext(?)`, [name]);
  return rows.length > 0;
}

/** Whether some backend waits for an advisory lock. */
async function someoneWaits(db: Knex): Promise<boolean> {
  const { rows } = await db.raw(`select 1 from pg_locks where locktype = 'advisory' and not granted`);
  return rows.length > 0;
}
