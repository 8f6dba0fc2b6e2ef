import { occurrencePage, type Schedule, type ScheduledOccurrence } from '../runtime/domain/calendar';
import { occurrenceId, occurrencesOf } from '../runtime/domain/recurrence';
import { decodeCursor } from '../runtime/cursor';

// occurrencePage asks each schedule for a few occurrences at a time (runtime/domain/calendar.ts).
// The reference here asks every schedule for a whole page, as the first version did: both must
// give the same pages, item for item, and the same walk through every occurrence of a window.

const MINUTE = 60_000;

function referencePage(schedules: readonly Schedule[], window: { from: number; to: number }, limit: number, after?: { startAt: number; scheduleId: string }) {
  const found: ScheduledOccurrence[] = [];
  for (const schedule of schedules) {
    let fromStart = window.from - schedule.durationMinutes * MINUTE + 1;
    if (after) fromStart = Math.max(fromStart, schedule.id > after.scheduleId ? after.startAt : after.startAt + 1);
    for (const time of occurrencesOf(schedule, { fromStart, toStart: window.to, max: limit + 1 })) {
      found.push({ id: occurrenceId(schedule.id, time.startAt), schedule, time });
    }
  }
  found.sort((a, b) => a.time.startAt - b.time.startAt || (a.schedule.id < b.schedule.id ? -1 : a.schedule.id > b.schedule.id ? 1 : 0));
  return { ids: found.slice(0, limit).map((o) => o.id), more: found.length > limit };
}

function schedule(n: number, startsAt: string, recurrence: string | null, durationMinutes = 60, timezone = 'Europe/London'): Schedule {
  return {
    id: `sch_${String(n).padStart(24, '0')}`, templateId: 'tpl_x', siteId: 'site_x', assigneeUserId: null, timezone, startsAt,
    startsAtUtc: '', durationMinutes, recurrence, createdAt: '', updatedAt: '',
  } as Schedule;
}

describe('occurrencePage', () => {
  it('pages like asking every schedule for a whole page, for many schedules and few, dense and sparse', () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const rules = [null, 'FREQ=DAILY', 'FREQ=DAILY;INTERVAL=3', 'FREQ=WEEKLY;BYDAY=MO,WE,FR', 'FREQ=WEEKLY;INTERVAL=2', 'FREQ=MONTHLY;BYDAY=-1FR', 'FREQ=DAILY;COUNT=5'];
    const zones = ['Europe/London', 'America/New_York', 'Asia/Tokyo', 'UTC'];
    const from = Date.parse('2026-03-01T00:00:00Z');
    let pages = 0;
    // (schedules, page sizes, days of window): few schedules with small pages walk many pages;
    // many schedules with a page much smaller than their occurrences are what the reads in
    // batches are for
    for (const [count, limits, days] of [[0, [50], 60], [1, [1, 500], 60], [3, [1], 60], [2, [3], 60], [7, [1, 50], 45], [40, [3, 50], 14], [150, [50, 500], 10]] as const) {
      const window = { from, to: from + days * 86_400_000 };
      const schedules = Array.from({ length: count }, (_, i) => {
        const day = 1 + Math.floor(random() * 28);
        const hour = Math.floor(random() * 4) * 3; // shared hours, so starts tie and the schedule id decides
        return schedule(i, `2026-0${2 + Math.floor(random() * 2)}-${String(day).padStart(2, '0')}T${String(hour).padStart(2, '0')}:00:00`,
          rules[Math.floor(random() * rules.length)], 30 + Math.floor(random() * 4) * 60, zones[Math.floor(random() * zones.length)]);
      });
      for (const limit of limits) {
        let cursor: string | undefined;
        let after: { startAt: number; scheduleId: string } | undefined;
        const walked: string[] = [];
        for (;;) {
          const page = occurrencePage(schedules, window, { limit, cursor });
          const reference = referencePage(schedules, window, limit, after);
          expect(page.items.map((o) => o.id)).toEqual(reference.ids);
          expect(page.nextCursor !== null).toBe(reference.more);
          walked.push(...page.items.map((o) => o.id));
          pages++;
          if (page.nextCursor === null) break;
          cursor = page.nextCursor;
          const [startAt, scheduleId] = decodeCursor(cursor, ['text', 'text']) as [string, string];
          after = { startAt: Date.parse(startAt), scheduleId };
        }
        // the walk holds every occurrence once
        expect(new Set(walked).size).toBe(walked.length);
        expect(walked).toEqual(referencePage(schedules, window, 100_000).ids);
      }
    }
    expect(pages).toBeGreaterThan(50);
  });
});
