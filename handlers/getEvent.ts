import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findEvent } from '../runtime/storage/repositories/eventsRepository';

export default defineHandler('getEvent', async ({ db, principal, path }) => {
  const event = await findEvent(db, principal.orgId, path.id);
  if (!event) throw notFound('event', path.id);
  return { status: 200, body: event };
});
