import { defineHandler } from '../runtime/http/handler';
import { deleteSite } from '../runtime/domain/sites';

export default defineHandler('deleteSite', async ({ db, principal, path }) => {
  await deleteSite(db, principal.orgId, path.id);
  return { status: 204 };
});
