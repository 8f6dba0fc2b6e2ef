import { defineHandler } from '../runtime/http/handler';
import { updateLastLocation } from '../runtime/domain/lastLocation';

export default defineHandler('updateUser', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateLastLocation(db, principal.orgId, path.id, body),
}));
