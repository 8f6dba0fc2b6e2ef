import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { decodeCursor, encodeCursor, type Page } from '../../cursor';
import { rowsOf } from '../rawRows';
import { dialectOf } from '../databaseErrors';
import type { SqliteStatements } from '../database';

export type Event = components['schemas']['Event'];
type EventType = components['schemas']['EventType'];

export interface EventRow {
  seq: number;
  id: string;
  org_id: string;
  type: string;
  resource_id: string | null;
  data: string;
  changed_fields: string | null;
  /** Update events: JSON object, each changed field's value before the change (migration 0018). */
  previous_values: string | null;
  occurred_at: string;
}

/**
 * A stored event as the feed answers it. The contract types `data` by `type` (Event's oneOf); the
 * row holds what recordEvent was given for that type, so the pairing is asserted here, not proved
 * (the response checks of the tests validate it against the contract).
 */
export function toEvent(row: EventRow): Event {
  return {
    id: row.id,
    type: row.type as EventType,
    sequence: Number(row.seq),
    occurredAt: row.occurred_at,
    data: JSON.parse(row.data),
    ...(row.changed_fields === null ? {} : { changedFields: JSON.parse(row.changed_fields) as string[] }),
    ...(row.previous_values === null ? {} : { previousValues: JSON.parse(row.previous_values) as Record<string, unknown> }),
  } as Event;
}

// Fixed text run through the driver (storage/database.ts, onSqliteConnection): every domain write runs
// it, and Knex's builder and runner cost more than the insert itself. No `returning`: nothing
// reads the event's seq at the write (it is the feed's, read later), and SQLite carries
// `returning` out as a trigger that collects the rows in a temporary table — about 1.5 of the
// ~19 µs of SQLite CPU an event adds to a write (bench/README.md, "What changed in this round").
const INSERT_SQL = `insert into events (id, org_id, type, resource_id, data, changed_fields, previous_values, occurred_at)
  values (?, ?, ?, ?, ?, ?, ?, ?)`;

/**
 * Inserts the event on SQLite, in the work of onSqliteConnection (storage/database.ts); on
 * Postgres webhookDeliveriesRepository.insertEventAndQueueDeliveries does it all in one statement.
 */
export function insertEventOn(conn: SqliteStatements, row: Omit<EventRow, 'seq' | 'occurred_at'>, occurredAt: string): void {
  conn.prepare(INSERT_SQL).run(row.id, row.org_id, row.type, row.resource_id, row.data, row.changed_fields, row.previous_values, occurredAt);
}

export async function findEvent(db: Knex, orgId: string, id: string): Promise<Event | undefined> {
  const row = await db<EventRow>('events').where({ org_id: orgId, id }).first();
  return row && toEvent(row);
}

export interface EventFilters {
  types?: readonly string[];
  resourceId?: string;
}

/** Where a feed cursor points: after the event with this seq, which occurred at this time. */
export interface FeedPosition {
  seq: number;
  occurredAt: string;
}

export function encodeFeedCursor(position: FeedPosition): string {
  return encodeCursor([position.seq, position.occurredAt]);
}

export function decodeFeedCursor(cursor: string): FeedPosition {
  const [seq, occurredAt] = decodeCursor(cursor, ['integer', 'text']);
  return { seq: seq as number, occurredAt: occurredAt as string };
}

/**
 * One page of the feed in `seq` order, strictly after `after`. Several types are read one type
 * per part, each in order through (org_id, type, seq), the parts merged by `union all … order by
 * seq`: both databases merge ordered parts and stop at the limit, where `type in (…)` would sort
 * every matching event or walk the whole feed past the other types. SQLite merges plain parts
 * (it would sort a part that is a subquery); Postgres merges only parts that are ordered and
 * limited subqueries (it sorts plain ones).
 */
export async function listEvents(db: Knex, orgId: string, filters: EventFilters, limit: number, after: FeedPosition | undefined): Promise<Page<Event>> {
  const part = (type: string | undefined) => {
    const query = db<EventRow>('events').where({ org_id: orgId });
    if (type !== undefined) query.where({ type });
    if (filters.resourceId !== undefined) query.where({ resource_id: filters.resourceId });
    if (after) query.where('seq', '>', after.seq);
    return query;
  };
  const types = filters.types?.length ? [...new Set(filters.types)] : [undefined];
  const parts: Knex.QueryBuilder[] = dialectOf(db) === 'postgres' && types.length > 1
    ? types.map((type, i) => db.select('*').from(part(type).orderBy('seq', 'asc').limit(limit + 1).as(`part${i}`)))
    : types.map(part);
  const [query, ...others] = parts;
  if (others.length) query.unionAll(others);
  const rows: EventRow[] = await query.orderBy('seq', 'asc').limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    data: page.map(toEvent),
    nextCursor: rows.length > limit && last ? encodeFeedCursor({ seq: Number(last.seq), occurredAt: last.occurred_at }) : null,
  };
}

/** The organization's highest event `seq`, 0 when it has none (one step down the (org_id, seq) index). */
export async function highestEventSeq(db: Knex, orgId: string): Promise<number> {
  const row: { seq: number } | undefined = await db('events').where({ org_id: orgId }).orderBy('seq', 'desc').first('seq');
  return row === undefined ? 0 : Number(row.seq);
}

/** The organization's most recent events of one type, newest first. */
export async function recentEventsOfType(db: Knex, orgId: string, type: string, count: number): Promise<Event[]> {
  const rows: EventRow[] = await db<EventRow>('events').where({ org_id: orgId, type }).orderBy('seq', 'desc').limit(count);
  return rows.map(toEvent);
}

/**
 * Ids of the events in [from, to) of the given types, oldest first, at most `limit`.
 *
 * There is no index on `occurred_at` (every write would pay for it): the window is first turned
 * into a range of `seq`, found by a binary search on the primary key, then the organization's
 * events of those types are read in that range only (the (org_id, type, seq) index), and filtered
 * by time exactly. Events are recorded in `seq` order with the time of their recording, so the
 * two orders agree; the range is widened by CLOCK_STEP_MARGIN_MS on both sides, so that an
 * event stamped by a clock stepped back by less than that is still found.
 */
export async function eventIdsInWindow(
  db: Knex,
  orgId: string,
  types: readonly string[],
  from: string,
  to: string,
  limit: number,
): Promise<{ id: string; type: string }[]> {
  const first = await firstSeqAtOrAfter(db, shiftIso(from, -CLOCK_STEP_MARGIN_MS));
  if (first === undefined) return [];
  const end = await firstSeqAtOrAfter(db, shiftIso(to, CLOCK_STEP_MARGIN_MS));
  const query = db('events')
    .where({ org_id: orgId })
    .whereIn('type', types)
    .where('seq', '>=', first)
    .where('occurred_at', '>=', from)
    .where('occurred_at', '<', to);
  if (end !== undefined) query.where('seq', '<', end);
  return query.orderBy('seq', 'asc').limit(limit).select('id', 'type');
}

/** How far back a clock may have been stepped for eventIdsInWindow to stay exact. */
const CLOCK_STEP_MARGIN_MS = 10 * 60_000;

const shiftIso = (iso: string, ms: number) => new Date(Date.parse(iso) + ms).toISOString();

/**
 * The lowest `seq` of an event (of any organization) that occurred at or after `time`, taking
 * `occurred_at` to grow with `seq`; undefined when every event occurred before it. A binary
 * search over the primary key: about log2(events) one-row reads, gaps in `seq` (purged or
 * rolled-back events) included.
 */
export async function firstSeqAtOrAfter(db: Knex, time: string): Promise<number | undefined> {
  const firstFrom = async (seq: number): Promise<{ seq: number; occurred_at: string } | undefined> =>
    db('events').select('seq', 'occurred_at').where('seq', '>=', seq).orderBy('seq').first();
  // most often every stored event is at or after `time` (the purge keeps up): one read says so
  const oldest = await firstFrom(0);
  if (oldest === undefined || oldest.occurred_at >= time) return oldest === undefined ? undefined : Number(oldest.seq);
  const highest: { seq: number } | undefined = await db('events').select('seq').orderBy('seq', 'desc').first();
  if (highest === undefined) return undefined;
  // every event below `low` occurred before `time`; the first event from `high` on, if any, at or after it
  let low = 0;
  let high = Number(highest.seq) + 1;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    const row = (await firstFrom(mid))!; // mid ≤ the highest seq: there is one
    if (row.occurred_at < time) low = Number(row.seq) + 1;
    else high = mid;
  }
  const found = await firstFrom(low);
  return found === undefined ? undefined : Number(found.seq);
}

/**
 * Deletes expired events from the start of the feed: those of the `batch` events with the lowest
 * `seq` that occurred before `cutoff`. Answers how many, and whether more may be left (a whole
 * batch was read and some of it was expired).
 *
 * Events are recorded in `seq` order with the time of their recording (the server's clock on
 * SQLite, the database's on Postgres), so the oldest by `seq` are the oldest by time and no index
 * on `occurred_at` is needed: every round reads `batch` rows of the primary key. An event stamped
 * later than its neighbours (a clock stepped back after it) is skipped over, not waited for; only
 * a whole batch of such events stops a purge until they expire. The feed's cursors expire by the
 * time they carry, never by what the purge has reached (domain/events.ts).
 */
export async function deleteEventsBefore(db: Knex, cutoff: string, batch: number): Promise<{ deleted: number; more: boolean }> {
  const oldest: { seq: number | string; occurred_at: string }[] = await db('events').select('seq', 'occurred_at').orderBy('seq').limit(batch);
  if (!oldest.some((row) => row.occurred_at < cutoff)) return { deleted: 0, more: false };
  const deleted = await db('events').where('seq', '<=', oldest[oldest.length - 1].seq).where('occurred_at', '<', cutoff).delete();
  return { deleted, more: oldest.length === batch && deleted > 0 };
}

/** The event bodies of some ids (for delivery). */
export async function eventRowsByIds(db: Knex, ids: readonly string[]): Promise<EventRow[]> {
  if (!ids.length) return [];
  return rowsOf<EventRow>(await db.raw(`select * from events where id in (${ids.map(() => '?').join(',')})`, [...ids]));
}
