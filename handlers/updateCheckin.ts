import { defineHandler } from '../runtime/http/handler';
import { updateCheckin } from '../runtime/domain/checkins';

export default defineHandler('updateCheckin', async ({ db, principal, path, body }) => ({
  status: 200,
  body: await updateCheckin(db, principal.orgId, path.id, body),
}));
