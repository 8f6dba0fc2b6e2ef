import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findUser } from '../runtime/storage/repositories/usersRepository';

export default defineHandler('getUser', async ({ db, principal, path }) => {
  const user = await findUser(db, principal.orgId, path.id);
  if (!user) throw notFound('user profile', path.id);
  return { status: 200, body: user };
});
