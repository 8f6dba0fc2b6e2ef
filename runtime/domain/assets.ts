import { Knex } from 'knex';
import { notFound } from '../errors';
import { checkReferences } from './references';
import * as assets from '../storage/repositories/assetsRepository';
import type { Asset, AssetCreate, AssetUpdate } from '../storage/repositories/assetsRepository';

/** Every write of an asset. `trx` is the request's transaction; each returns the asset as GET shows it. */

export async function createAsset(trx: Knex, orgId: string, body: AssetCreate): Promise<Asset> {
  await checkReferences(trx, orgId, [{ pointer: '/siteId', kind: 'site', id: body.siteId }]);
  return assets.insertAsset(trx, orgId, body);
}

export async function updateAsset(trx: Knex, orgId: string, id: string, changes: AssetUpdate): Promise<Asset> {
  const before = await assets.findAsset(trx, orgId, id);
  if (!before) throw notFound('asset', id);
  await checkReferences(trx, orgId, [{ pointer: '/siteId', kind: 'site', id: changes.siteId, unchanged: before.siteId }]);
  if (!(await assets.updateAsset(trx, orgId, id, changes))) throw notFound('asset', id);
  return (await assets.findAsset(trx, orgId, id))!;
}

/**
 * Deleting leaves a tombstone that every read ignores: a repeated delete without the same
 * Idempotency-Key finds nothing and answers 404 (with the key, the runtime replays the 204).
 */
export async function deleteAsset(trx: Knex, orgId: string, id: string): Promise<void> {
  if (!(await assets.deleteAsset(trx, orgId, id))) throw notFound('asset', id);
}
