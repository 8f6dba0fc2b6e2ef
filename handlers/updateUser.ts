import { defineHandler } from '../runtime/http/handler';
import { updateUser } from '../runtime/domain/users';

export default defineHandler('updateUser', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateUser(db, principal.orgId, path.id, body),
}));
