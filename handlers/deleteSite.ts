import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { deleteSite } from '../runtime/storage/repositories/sitesRepository';

export default defineHandler('deleteSite', async ({ db, principal, path }) => {
  if (!(await deleteSite(db, principal.orgId, path.id))) throw notFound('site', path.id);
  return { status: 204 };
});
