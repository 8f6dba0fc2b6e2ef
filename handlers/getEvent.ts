import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findEvent } from '../runtime/storage/repositories/eventsRepository';
import { committedReads } from '../runtime/storage/committedReads';

export default defineHandler('getEvent', async ({ db, principal, path }) => {
  const event = await findEvent(committedReads(db), principal.orgId, path.id); // as the feed reads
  if (!event) throw notFound('event', path.id);
  return { status: 200, body: event };
});
