import { defineHandler, pageOf } from '../runtime/http/handler';
import { invalidField } from '../runtime/errors';
import { timestampMs } from '../runtime/time';
import { listOccurrences } from '../runtime/storage/repositories/schedulesRepository';

/** A calendar window is a view, not an export: a year (and a leap day) bounds the work of one request. */
const MAX_WINDOW_DAYS = 366;

export default defineHandler('listCalendarOccurrences', async ({ db, principal, query }) => {
  const from = timestampMs(query.from);
  const to = timestampMs(query.to);
  if (to <= from) throw invalidField('/query/to', 'must be after from');
  if (to - from > MAX_WINDOW_DAYS * 86_400_000) throw invalidField('/query/to', `must be at most ${MAX_WINDOW_DAYS} days after from`);
  const page = await listOccurrences(
    db,
    principal.orgId,
    { from, to },
    { siteId: query.siteId, assigneeUserId: query.assigneeUserId, scheduleId: query.scheduleId, templateId: query.templateId },
    pageOf(query),
  );
  return { status: 200, body: page };
});
