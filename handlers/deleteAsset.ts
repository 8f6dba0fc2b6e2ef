import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { deleteAsset } from '../runtime/storage/repositories/assetsRepository';

// A retry with the same Idempotency-Key is replayed by the runtime (204, Idempotent-Replayed: true)
// before this runs; a retry without it finds only the tombstone and answers 404, as the seed requires.
export default defineHandler('deleteAsset', async ({ db, principal, path }) => {
  if (!(await deleteAsset(db, principal.orgId, path.id))) throw notFound('asset', path.id);
  return { status: 204 };
});
