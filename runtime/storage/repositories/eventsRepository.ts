import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { decodeCursor, encodeCursor, type Page } from '../../cursor';
import { rowsOf } from '../rawRows';
import { writeReturning } from '../database';

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
  occurred_at: string;
}

export function toEvent(row: EventRow): Event {
  return {
    id: row.id,
    type: row.type as EventType,
    sequence: Number(row.seq),
    occurredAt: row.occurred_at,
    data: JSON.parse(row.data),
    ...(row.changed_fields === null ? {} : { changedFields: JSON.parse(row.changed_fields) as string[] }),
  };
}

// Fixed text run through the driver (storage/database.ts, writeReturning): every domain write
// runs it, and Knex's builder and runner cost more than the insert itself.
const INSERT_SQL = `insert into events (id, org_id, type, resource_id, data, changed_fields, occurred_at)
  values (?, ?, ?, ?, ?, ?, ?) returning seq`;

/** Inserts the event and answers its `seq` (SQLite; on Postgres webhookDeliveriesRepository.insertEventAndQueueDeliveries does it all in one statement). */
export async function insertEvent(db: Knex, row: Omit<EventRow, 'seq'>): Promise<number> {
  const [inserted] = await writeReturning<{ seq: number | string }>(
    db,
    INSERT_SQL,
    [row.id, row.org_id, row.type, row.resource_id, row.data, row.changed_fields, row.occurred_at],
  );
  return Number(inserted.seq);
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

/** One page of the feed in `seq` order, strictly after `after`. */
export async function listEvents(db: Knex, orgId: string, filters: EventFilters, limit: number, after: FeedPosition | undefined): Promise<Page<Event>> {
  const query = db<EventRow>('events').where({ org_id: orgId });
  if (filters.types?.length) query.whereIn('type', filters.types);
  if (filters.resourceId !== undefined) query.where({ resource_id: filters.resourceId });
  if (after) query.where('seq', '>', after.seq);
  const rows: EventRow[] = await query.orderBy('seq', 'asc').limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    data: page.map(toEvent),
    nextCursor: rows.length > limit && last ? encodeFeedCursor({ seq: Number(last.seq), occurredAt: last.occurred_at }) : null,
  };
}

/** The organization's most recent events of one type, newest first. */
export async function recentEventsOfType(db: Knex, orgId: string, type: string, count: number): Promise<Event[]> {
  const rows: EventRow[] = await db<EventRow>('events').where({ org_id: orgId, type }).orderBy('seq', 'desc').limit(count);
  return rows.map(toEvent);
}

/** Ids of the events in [from, to) of the given types, oldest first, at most `limit`. */
export async function eventIdsInWindow(
  db: Knex,
  orgId: string,
  types: readonly string[],
  from: string,
  to: string,
  limit: number,
): Promise<{ id: string; type: string }[]> {
  return db('events')
    .where({ org_id: orgId })
    .whereIn('type', types)
    .where('occurred_at', '>=', from)
    .where('occurred_at', '<', to)
    .orderBy('seq', 'asc')
    .limit(limit)
    .select('id', 'type');
}

/**
 * Deletes expired events from the start of the feed: of the `batch` events with the lowest
 * `seq`, those before the first one that occurred at or after `cutoff`. Answers how many, and
 * whether more may be left (the whole batch was expired).
 *
 * Events are inserted with the time of their insert, in `seq` order (SQLite: one writer at a
 * time; Postgres: under the organization's event lock, with the database's clock), so `seq` order
 * is time order and no index on `occurred_at` is needed: every round reads at most `batch` rows of
 * the primary key. Where the two orders disagree — servers whose clocks differ, on Postgres —
 * an event waits at most that difference longer than its retention. The feed's cursors expire by
 * the time they carry, never by what the purge has reached (domain/events.ts).
 */
export async function deleteEventsBefore(db: Knex, cutoff: string, batch: number): Promise<{ deleted: number; more: boolean }> {
  const oldest: { seq: number | string; occurred_at: string }[] = await db('events').select('seq', 'occurred_at').orderBy('seq').limit(batch);
  const firstKept = oldest.findIndex((row) => row.occurred_at >= cutoff);
  const expired = firstKept === -1 ? oldest.length : firstKept;
  if (expired === 0) return { deleted: 0, more: false };
  const deleted = await db('events').where('seq', '<=', oldest[expired - 1].seq).where('occurred_at', '<', cutoff).delete();
  return { deleted, more: expired === batch };
}

/** The event bodies of some ids (for delivery). */
export async function eventRowsByIds(db: Knex, ids: readonly string[]): Promise<EventRow[]> {
  if (!ids.length) return [];
  return rowsOf<EventRow>(await db.raw(`select * from events where id in (${ids.map(() => '?').join(',')})`, [...ids]));
}
