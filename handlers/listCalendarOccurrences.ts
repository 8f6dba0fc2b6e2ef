import { defineHandler, pageOf } from '../runtime/http/handler';
import { invalidField } from '../runtime/errors';
import { timestampMs } from '../runtime/time';
import { occurrencePage, toOccurrence } from '../runtime/domain/calendar';
import { schedulesForCalendar } from '../runtime/storage/repositories/schedulesRepository';
import { runsOfOccurrences } from '../runtime/storage/repositories/runsRepository';

/** A calendar window is a view, not an export: a year (and a leap day) bounds the work of one request. */
const MAX_WINDOW_DAYS = 366;

export default defineHandler('listCalendarOccurrences', async ({ db, principal, query }) => {
  const from = timestampMs(query.from);
  const to = timestampMs(query.to);
  if (to <= from) throw invalidField('/query/to', 'must be after from');
  if (to - from > MAX_WINDOW_DAYS * 86_400_000) throw invalidField('/query/to', `must be at most ${MAX_WINDOW_DAYS} days after from`);
  const schedules = await schedulesForCalendar(db, principal.orgId, {
    siteId: query.siteId, assigneeUserId: query.assigneeUserId, scheduleId: query.scheduleId, templateId: query.templateId,
  });
  const page = occurrencePage(schedules, { from, to }, pageOf(query));
  const runs = await runsOfOccurrences(db, principal.orgId, page.items.map((o) => o.id));
  return { status: 200, body: { data: page.items.map((o) => toOccurrence(o, runs.get(o.id))), nextCursor: page.nextCursor } };
});
