import { defineHandler } from '../runtime/http/handler';
import { createUser } from '../runtime/domain/users';

export default defineHandler('createUser', async ({ db, principal, body }) => {
  const user = await createUser(db, principal.orgId, body);
  return { status: 201, body: user, headers: { Location: `/v1/users/${user.id}` } };
});
