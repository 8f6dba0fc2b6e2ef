import { Knex } from 'knex';
import { notFound } from '../errors';
import { checkReferences } from './references';
import { finishUpdate, recordEvent, tombstone } from './events';
import * as assets from '../storage/repositories/assetsRepository';
import type { Asset, AssetCreate, AssetUpdate } from '../storage/repositories/assetsRepository';

/**
 * Every write of an asset. `trx` is the request's transaction; each returns the asset as GET
 * shows it and records its event last (runtime/domain/events.ts).
 */

export async function createAsset(trx: Knex, orgId: string, body: AssetCreate): Promise<Asset> {
  await checkReferences(trx, orgId, [{ pointer: '/siteId', kind: 'site', id: body.siteId }]);
  const asset = await assets.insertAsset(trx, orgId, body);
  await recordEvent(trx, orgId, { type: 'asset.created', data: asset });
  return asset;
}

export async function updateAsset(trx: Knex, orgId: string, id: string, changes: AssetUpdate): Promise<Asset> {
  const before = await assets.findAssetForUpdate(trx, orgId, id);
  if (!before) throw notFound('asset', id);
  await checkReferences(trx, orgId, [{ pointer: '/siteId', kind: 'site', id: changes.siteId, unchanged: before.siteId }]);
  if (!(await assets.updateAsset(trx, orgId, id, changes))) throw notFound('asset', id);
  const after = (await assets.findAsset(trx, orgId, id))!;
  return finishUpdate(trx, orgId, 'asset.updated', before, after, (at) => assets.restoreAssetUpdatedAt(trx, orgId, id, at));
}

/**
 * Deleting leaves a tombstone that every read ignores: a repeated delete without the same
 * Idempotency-Key finds nothing and answers 404 (with the key, the runtime replays the 204).
 */
export async function deleteAsset(trx: Knex, orgId: string, id: string): Promise<void> {
  // read with a lock first, as an update does: a write of the same asset in the same Postgres
  // group commit is then told apart (storage/pgGroupCommit.ts, rowLockedBy)
  if (!(await assets.findAssetForUpdate(trx, orgId, id)) || !(await assets.deleteAsset(trx, orgId, id))) throw notFound('asset', id);
  await recordEvent(trx, orgId, { type: 'asset.deleted', data: tombstone(id) });
}
