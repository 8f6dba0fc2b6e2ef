import { Knex } from 'knex';
import { ADVISORY_LOCK_KEY_SQL } from '../../runtime/storage/repositories/idempotencyKeysRepository';

/**
 * Postgres: the backends holding the advisory lock of (API key id, Idempotency-Key), i.e. the
 * connections of the requests running that key. A bigint advisory lock shows in pg_locks as its
 * high half in classid and its low half in objid.
 */
export async function claimOwnerPids(db: Knex, apiKeyId: string, key: string): Promise<number[]> {
  const result = await db.raw(
    `select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1
       and ((classid::bigint << 32) | objid::bigint) = ${ADVISORY_LOCK_KEY_SQL}`,
    [apiKeyId, key],
  );
  return result.rows.map((r: { pid: number }) => r.pid);
}

/**
 * Postgres: ends the connections running `key`, as the death of their process would, and waits
 * until their locks are gone (pg_terminate_backend only signals: the backend exits a moment later).
 */
export async function terminateClaimOwners(db: Knex, apiKeyId: string, key: string): Promise<number> {
  const pids = await claimOwnerPids(db, apiKeyId, key);
  for (const pid of pids) await db.raw('select pg_terminate_backend(?)', [pid]);
  for (let i = 0; i < 100 && (await claimOwnerPids(db, apiKeyId, key)).length > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return pids.length;
}
