import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findCheckin } from '../runtime/storage/repositories/checkinsRepository';

export default defineHandler('getCheckin', async ({ db, principal, path }) => {
  const checkin = await findCheckin(db, principal.orgId, path.id);
  if (!checkin) throw notFound('checkin', path.id);
  return { status: 200, body: checkin };
});
