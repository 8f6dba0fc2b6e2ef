import { defineHandler } from '../runtime/http/handler';
import { createAsset } from '../runtime/domain/assets';

export default defineHandler('createAsset', async ({ db, principal, body }) => {
  const asset = await createAsset(db, principal.orgId, body);
  return { status: 201, body: asset, headers: { Location: `/v1/assets/${asset.id}` } };
});
