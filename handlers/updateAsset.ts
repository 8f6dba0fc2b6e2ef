import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { updateAsset } from '../runtime/storage/repositories/assetsRepository';

export default defineHandler('updateAsset', async ({ db, principal, path, body }) => {
  const asset = await updateAsset(db, principal.orgId, path.id, body);
  if (!asset) throw notFound('asset', path.id);
  return { status: 200, body: asset };
});
