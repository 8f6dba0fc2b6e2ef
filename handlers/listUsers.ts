import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { listUsers } from '../runtime/storage/repositories/usersRepository';

export default defineHandler('listUsers', async ({ db, principal, query }) => ({
  status: 200,
  body: await listUsers(db, principal.orgId, filtersOf(query), pageOf(query)),
}));
