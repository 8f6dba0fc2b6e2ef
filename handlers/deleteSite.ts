import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { deleteSite } from '../runtime/storage/repositories/sitesRepository';
import { recordEvent, tombstone } from '../runtime/domain/events';

export default defineHandler('deleteSite', async ({ db, principal, path }) => {
  if (!(await deleteSite(db, principal.orgId, path.id))) throw notFound('site', path.id);
  await recordEvent(db, principal.orgId, { type: 'site.deleted', data: tombstone(path.id) });
  return { status: 204 };
});
