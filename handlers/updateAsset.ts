import { defineHandler } from '../runtime/http/handler';
import { updateAsset } from '../runtime/domain/assets';

export default defineHandler('updateAsset', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateAsset(db, principal.orgId, path.id, body),
}));
