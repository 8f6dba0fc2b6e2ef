import { defineHandler } from '../runtime/http/handler';
import { deleteAsset } from '../runtime/domain/assets';

export default defineHandler('deleteAsset', async ({ db, principal, path }) => {
  await deleteAsset(db, principal.orgId, path.id);
  return { status: 204 };
});
