// What one schedule costs a calendar read (a page of up to 51 occurrences in November 2026),
// for rules begun in 1970 and a year ago: the shipped walk, which starts at the last whole period
// before the window, against rrule walking from startsAt (expandOccurrences with fastForward
// false, the reference the tests compare against), and rules that never occur. Then a page of 50
// from 10, 100 and 1 000 daily schedules: occurrencePage, which reads each schedule a few
// occurrences at a time, against asking every schedule for a whole page (as test/calendarPage.test.ts's reference does).
// Usage: npm run build && node bench/micro/calendarWalk.cjs   (ROUNDS=… repeats each, default 20)
'use strict';
const path = require('node:path');
const DOMAIN = path.join(__dirname, '..', '..', 'dist', 'runtime', 'domain');
const { expandOccurrences, occurrencesOf } = require(path.join(DOMAIN, 'recurrence.js'));
const { occurrencePage } = require(path.join(DOMAIN, 'calendar.js'));

const rounds = Number(process.env.ROUNDS ?? 20);
const cases = [
  ['1970-01-01T09:00:00', 'FREQ=DAILY'],
  ['2025-11-24T09:00:00', 'FREQ=DAILY'],
  ['1970-01-05T09:00:00', 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR'],
  ['1970-01-07T07:30:00', 'FREQ=WEEKLY;INTERVAL=3;BYDAY=MO,FR'],
  ['1970-01-31T09:00:00', 'FREQ=MONTHLY'],
  ['1970-02-01T18:00:00', 'FREQ=MONTHLY;BYDAY=-1FR'],
  ['2000-01-03T09:00:00', 'FREQ=WEEKLY;BYDAY=WE,SA;COUNT=2812'],
  ['2020-01-01T09:00:00', 'FREQ=DAILY;INTERVAL=7;BYDAY=MO'],
  ['2020-01-01T09:00:00', 'FREQ=MONTHLY;BYDAY=1MO,FR'],
  ['2026-02-02T09:00:00', 'FREQ=MONTHLY;INTERVAL=48;BYDAY=5MO'],
];
const fromStart = Date.UTC(2026, 10, 1);
const toStart = Date.UTC(2026, 11, 1);
const ms = (fn) => {
  fn();
  const start = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) fn();
  return Number(process.hrtime.bigint() - start) / rounds / 1e6;
};
console.log('startsAt             recurrence                            occurrences  shipped ms  from startsAt ms');
for (const [startsAt, recurrence] of cases) {
  const timing = { timezone: 'Europe/London', startsAt, durationMinutes: 60, recurrence };
  const query = { fromStart, toStart, max: 51 };
  const found = expandOccurrences(timing, query, true).length;
  const shipped = ms(() => expandOccurrences(timing, query, true));
  const reference = ms(() => expandOccurrences(timing, query, false));
  console.log(`${startsAt}  ${recurrence.padEnd(36)}  ${String(found).padStart(11)}  ${shipped.toFixed(2).padStart(10)}  ${reference.toFixed(2).padStart(16)}`);
}

console.log('\nschedules  page  occurrencePage ms  whole page from each ms');
for (const count of [10, 100, 1000]) {
  const schedules = Array.from({ length: count }, (_, i) => ({
    id: `sch_${String(i).padStart(24, '0')}`, timezone: 'Europe/London', startsAt: `2026-0${1 + (i % 9)}-0${1 + (i % 9)}T0${i % 10}:00:00`, durationMinutes: 60, recurrence: 'FREQ=DAILY',
  }));
  const window = { from: fromStart, to: toStart };
  const wholePage = () => {
    const found = [];
    for (const schedule of schedules) for (const time of occurrencesOf(schedule, { fromStart: window.from - 3_600_000 + 1, toStart: window.to, max: 51 })) found.push({ schedule, time });
    return found.sort((a, b) => a.time.startAt - b.time.startAt || (a.schedule.id < b.schedule.id ? -1 : 1)).slice(0, 50);
  };
  const shipped = ms(() => occurrencePage(schedules, window, { limit: 50 }));
  const reference = ms(() => wholePage());
  console.log(`${String(count).padStart(9)}  ${'50'.padStart(4)}  ${shipped.toFixed(1).padStart(17)}  ${reference.toFixed(1).padStart(23)}`);
}
