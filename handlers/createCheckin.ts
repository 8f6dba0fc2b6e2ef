import { defineHandler } from '../runtime/http/handler';
import { createCheckin } from '../runtime/domain/checkins';

export default defineHandler('createCheckin', async ({ db, principal, body }) => {
  const checkin = await createCheckin(db, principal.orgId, body);
  return { status: 201, body: checkin, headers: { Location: `/v1/checkins/${checkin.id}` } };
});
