import { defineHandler } from '../runtime/http/handler';
import { readEventFeed } from '../runtime/domain/events';

export default defineHandler('listEvents', async ({ db, principal, query, config }) => ({
  status: 200,
  body: await readEventFeed(db, principal.orgId, { types: query.types, resourceId: query.resourceId, after: query.after, afterEvent: query.afterEvent, since: query.since, limit: query.limit ?? 50 }, config.eventsRetentionDays),
}));
