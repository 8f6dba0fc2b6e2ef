import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findAsset } from '../runtime/storage/repositories/assetsRepository';

export default defineHandler('getAsset', async ({ db, principal, path }) => {
  const asset = await findAsset(db, principal.orgId, path.id);
  if (!asset) throw notFound('asset', path.id);
  return { status: 200, body: asset };
});
