import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { updateUser } from '../runtime/storage/repositories/usersRepository';

export default defineHandler('updateUser', async ({ db, principal, path, body }) => {
  const user = await updateUser(db, principal.orgId, path.id, body);
  if (!user) throw notFound('user profile', path.id);
  return { status: 200, body: user };
});
