import { defineHandler } from '../runtime/http/handler';
import { updateSite } from '../runtime/domain/sites';

export default defineHandler('updateSite', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateSite(db, principal.orgId, path.id, body),
}));
