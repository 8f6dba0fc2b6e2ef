import { isDeepStrictEqual } from 'node:util';
import { Knex } from 'knex';
import { idCreatedAt, newId } from '../ids';
import { normalizeTimestamp, nowIso } from '../time';
import type { components } from '../../generated/types';
import { inWriteTransaction } from '../storage/writeTransaction';
import { committedReads } from '../storage/committedReads';
import { ApiError, validationError } from '../errors';
import { decodeFeedCursor, deleteEventsBefore, encodeFeedCursor, Event, type FeedPosition, findEvent, firstSeqAtOrAfter, highestEventSeq, listEvents } from '../storage/repositories/eventsRepository';
import { deleteAttemptsBefore, deleteDeliveriesBefore, insertEventAndQueueDeliveries } from '../storage/repositories/webhookDeliveriesRepository';
import { EVENT_TYPES, isEventTypeSelection, typesSelected, type EventType, type EventTypeSelection } from './eventTypes';
import type { PurgeOptions } from '../periodic';

export type { EventType } from './eventTypes';
export { EVENT_TYPES } from './eventTypes';

/**
 * What `data` holds for events of type T: the contract's variant of Event for that type (the
 * resource its GET answers, a tombstone for a deletion). Recording another shape does not compile.
 */
export type EventData<T extends EventType> = EventDataByType[T];
type EventDataByType = { [T in EventType]: Extract<components['schemas']['Event'], { type: T }>['data'] };

export interface EventInput<T extends EventType = EventType> {
  type: T;
  /** The resource exactly as GET answers it after the change, or a tombstone (see `tombstone`). */
  data: EventData<T>;
  /** Update events: the names of the fields whose value changed (see `changedFields`). */
  changedFields?: string[];
  /** Update events: each changed field's value before the change, as GET showed it (null for a field it did not show). */
  previousValues?: Record<string, unknown>;
}

/**
 * Records the event of a write, inside the write's own transaction `trx`: a rolled-back write
 * leaves no event, a committed one always has it. Also queues one delivery per subscription of
 * the organization that listens to this type (active or paused), in the same transaction.
 *
 * Call it last in the write, after the resource's own inserts: it takes the organization's
 * event lock (Postgres), which serializes the organization's writers until COMMIT so that
 * `sequence` is commit order and a feed walk never skips an event. A table's insert lock taken
 * after it could deadlock with a writer that holds that table lock and waits for this one.
 * On Postgres the lock, the event, the lookup of the subscriptions listening and their
 * deliveries are one statement (each round trip under the lock is paid by every writer of the
 * organization). A subscription whose creation commits while this write is in flight may miss
 * this event. In a Postgres write transaction that statement is sent without waiting for its
 * answer (storage/pgPipeline.ts): it travels with the COMMIT, and its failure fails the COMMIT.
 *
 * Answers the event's id. Its sequence is the database's, known at commit.
 */
export async function recordEvent<T extends EventType>(trx: Knex, orgId: string, input: EventInput<T>): Promise<string> {
  const id = newId('evt');
  const resourceId = typeof (input.data as { id?: unknown }).id === 'string' ? ((input.data as { id: string }).id) : null;
  await insertEventAndQueueDeliveries(trx, {
    id,
    org_id: orgId,
    type: input.type,
    resource_id: resourceId,
    data: JSON.stringify(input.data),
    changed_fields: input.changedFields === undefined ? null : JSON.stringify(input.changedFields),
    previous_values: input.previousValues === undefined ? null : JSON.stringify(input.previousValues),
  }, nowIso);
  return id;
}

/**
 * Records the update event of a change from `before` to `after` (both as GET shows them), naming
 * the fields that changed. An update that changed no field but `updatedAt` records nothing: a
 * consumer has nothing to apply, and a client re-sending a PATCH would otherwise fan out
 * deliveries for no change (the contract's events description says so). Call it last, like
 * `recordEvent`.
 */
export async function recordUpdate<T extends EventType>(trx: Knex, orgId: string, type: T, before: EventData<T>, after: EventData<T>): Promise<string | undefined> {
  const fields = changedFields(before, after);
  if (!fields.length) return undefined;
  const was = before as Record<string, unknown>;
  const previousValues = Object.fromEntries(fields.map((name) => [name, was[name] === undefined ? null : was[name]]));
  return recordEvent(trx, orgId, { type, data: after, changedFields: fields, previousValues });
}

/**
 * Finishes an update that wrote its changes and read the resource back (`after`): records the
 * update event and answers `after` when a field changed; when none did but `updatedAt`, records
 * nothing, puts `updatedAt` back (`restore`) and answers `before`. So a request that changes
 * nothing leaves the resource as it was, and what GET answers stays what the last event carried
 * (a consumer mirroring the resource from events never drifts on `updatedAt`). Call it last, like
 * `recordEvent`.
 */
export async function finishUpdate<T extends EventType, R extends { updatedAt: string }>(
  trx: Knex, orgId: string, type: T, before: R & EventData<T>, after: R & EventData<T>, restore: (updatedAt: string) => Promise<void>,
): Promise<R> {
  if (await recordUpdate<T>(trx, orgId, type, before, after)) return after;
  await restore(before.updatedAt);
  return before;
}

/** Whether `next` differs from `before` in a field other than `updatedAt`: an update computed in memory writes nothing when not (see finishUpdate). */
export function changesAnything(before: object, next: object): boolean {
  return changedFields(before, next).length > 0;
}

/** The `data` of a deletion event. */
export function tombstone(id: string): { id: string; deleted: true } {
  return { id, deleted: true };
}

/**
 * The names of the top-level fields whose value differs between two representations of a
 * resource (deep comparison), sorted. `updatedAt` is left out by default: it changes on every
 * update, so naming it tells a consumer nothing.
 */
export function changedFields(before: object, after: object, ignore: readonly string[] = ['updatedAt']): string[] {
  const a = before as Record<string, unknown>;
  const b = after as Record<string, unknown>;
  const names = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...names].filter((name) => !ignore.includes(name) && !isDeepStrictEqual(a[name], b[name])).sort();
}

export type DeliveredEvent = components['schemas']['IntegrationEvent'];

/** An event as a webhook receives it (the signed body): `timestamp` is when it occurred. Same `type` and `data`, so the same variant of the contract's union. */
export function toDeliveredEvent(event: Event): DeliveredEvent {
  return {
    id: event.id,
    type: event.type,
    timestamp: event.occurredAt,
    sequence: event.sequence,
    data: event.data,
    ...(event.changedFields === undefined ? {} : { changedFields: event.changedFields }),
    ...(event.previousValues === undefined ? {} : { previousValues: event.previousValues }),
  } as DeliveredEvent;
}

/** The first instant still within the retention. */
export function retentionCutoff(retentionDays: number, now = Date.now()): string {
  return new Date(now - retentionDays * 86_400_000).toISOString();
}

/**
 * Deletes events older than the retention (from the oldest on, in `seq` order: see
 * deleteEventsBefore), and the deliveries made and the delivery attempts started before it, in short batches
 * (each delete holds the SQLite write lock or Postgres row locks only briefly), yielding between
 * them, until both have caught up (or `maxBatches` ran, or the process is `stopping`: no cap by
 * default, as for the idempotency purge). Several processes may run it at once: deleting is idempotent.
 */
export async function purgeExpiredEvents(db: Knex, retentionDays: number, { batch = 500, maxBatches = Infinity, stopping = () => false }: PurgeOptions = {}): Promise<number> {
  const cutoff = retentionCutoff(retentionDays);
  let total = 0;
  for (let round = 0; round < maxBatches && !stopping(); round++) {
    const events = await inWriteTransaction(db, (trx) => deleteEventsBefore(trx, cutoff, batch));
    const deliveries = await inWriteTransaction(db, (trx) => deleteDeliveriesBefore(trx, cutoff, batch));
    const attempts = await inWriteTransaction(db, (trx) => deleteAttemptsBefore(trx, cutoff, batch));
    total += events.deleted;
    if (!events.more && deliveries < batch && attempts < batch) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}

/**
 * How much older than the retention a cursor may not be: events are purged by `occurred_at`,
 * and occurredAt of consecutive events of an organization may differ by clock skew between
 * server hosts. A cursor this close to the edge is refused too, never followed into a gap.
 */
const CURSOR_EXPIRY_MARGIN_MS = 60_000;

export interface FeedRequest {
  types?: string;
  resourceId?: string;
  after?: string;
  /** The id of an event to start after: what a webhook receiver knows (its `webhook-id`). */
  afterEvent?: string;
  /** A time to start at: the first event that occurred at or after it. */
  since?: string;
  limit: number;
}

/**
 * One page of the change feed. `nextCursor` is always given — at the end of the feed it marks
 * where to resume — and a cursor older than the retention answers 410 CURSOR_EXPIRED: events
 * after it may have been purged, and a silent gap is worse than a resync.
 */
export async function readEventFeed(db: Knex, orgId: string, request: FeedRequest, retentionDays: number): Promise<{ data: Event[]; nextCursor: string }> {
  const selections = request.types?.split(',');
  const unknown = [...new Set(selections?.filter((t) => !isEventTypeSelection(t)))].map((t) => (t === '' ? '"" (an empty name between commas)' : t));
  if (unknown.length) {
    throw validationError(`Unknown event type ${unknown.join(', ')}`, [{ path: '/query/types', message: `unknown event type ${unknown.join(', ')}; known: ${EVENT_TYPES.join(', ')}, and the patterns * and <resource>.*` }]);
  }
  // the patterns a subscription lists read the types they cover now (`*`: every event, no filter)
  const types = selections === undefined || selections.includes('*') ? undefined : typesSelected(selections as EventTypeSelection[]);
  const starts = (['after', 'afterEvent', 'since'] as const).filter((name) => request[name] !== undefined);
  if (starts.length > 1) {
    throw validationError(`Pass one of after (a cursor), afterEvent (an event id) or since (a time), not ${starts.join(' and ')}`, [{ path: `/query/${starts[1]}`, message: `cannot be combined with ${starts[0]}` }]);
  }
  const reads = committedReads(db); // committed events only: one read on SQLite inside an open group commit could be undone (storage/committedReads.ts)
  // a time yet to come has no place in the feed: a walk from it would be handed events that occur
  // before it (those of the minutes until then)
  if (request.since !== undefined && Date.parse(request.since) > Date.now()) {
    throw validationError('since is in the future: pass a time that has passed', [{ path: '/query/since', message: 'must not be in the future' }]);
  }
  if (request.since !== undefined && Date.parse(request.since) < Date.parse(retentionCutoff(retentionDays)) + END_CURSOR_ALLOWANCE_MS) {
    throw new ApiError('CURSOR_EXPIRED', `since is older than the ${retentionDays}-day event retention (or within five minutes of its edge); resynchronise and walk the feed again from the start`);
  }
  let after = request.after !== undefined
    ? decodeFeedCursorOrThrow(request.after)
    : request.afterEvent !== undefined ? await positionOfEvent(reads, orgId, request.afterEvent, retentionDays)
    : request.since !== undefined ? await positionAt(reads, orgId, normalizeTimestamp(request.since)) : undefined;
  if (after && Date.parse(after.occurredAt) < Date.parse(retentionCutoff(retentionDays)) + CURSOR_EXPIRY_MARGIN_MS) {
    throw new ApiError('CURSOR_EXPIRED', `The ${request.after !== undefined ? 'cursor' : 'event afterEvent names'} is older than the ${retentionDays}-day event retention; resynchronise and walk the feed again from the start`);
  }
  if (after === undefined) after = await startOfWalk(reads, orgId, retentionDays);
  // Both taken before the page is read. Every event committed after it occurred after `readAt`,
  // less the time a write is in flight and the skew between this host's clock and the one that
  // stamps events (the database's, on Postgres): END_CURSOR_ALLOWANCE_MS covers both. And every
  // event up to `highest` is committed (an organization's events commit in `seq` order).
  const readAt = new Date(Date.now() - END_CURSOR_ALLOWANCE_MS).toISOString();
  const filtered = types !== undefined || request.resourceId !== undefined;
  const highest = filtered ? await highestEventSeq(reads, orgId) : 0;
  const page = await listEvents(reads, orgId, { types, resourceId: request.resourceId }, request.limit, after);
  if (page.nextCursor) return { data: page.data, nextCursor: page.nextCursor };
  // The end of the feed: the next event is yet to come, so the cursor dates from this read (less
  // the allowance), not from the last event — a consumer polling a quiet feed (or a rarely matching filter) keeps a
  // fresh cursor instead of being told to resynchronise 30 days after the last event. With a
  // filter it points past every event the read could see, matching or not: such a cursor reused
  // without the filter must not step over events the purge removed since.
  const last = page.data[page.data.length - 1];
  const seq = Math.max(last?.sequence ?? 0, after?.seq ?? 0, highest);
  return { data: page.data, nextCursor: encodeFeedCursor({ seq, occurredAt: readAt }) };
}

/**
 * Where a walk from the start begins: after the events that are older than the retention (the
 * purge runs every few minutes, so some are still stored) or that will be within
 * END_CURSOR_ALLOWANCE_MS. A page of them would end in a cursor the next request refuses with 410,
 * and the walk, started again, would meet them again. undefined when there are none.
 */
async function startOfWalk(reads: Knex, orgId: string, retentionDays: number): Promise<FeedPosition | undefined> {
  const edge = new Date(Date.parse(retentionCutoff(retentionDays)) + END_CURSOR_ALLOWANCE_MS).toISOString();
  const first = await firstSeqAtOrAfter(reads, edge);
  // none at or after the edge: whatever the organization has stored is about to go
  if (first === undefined) return { seq: await highestEventSeq(reads, orgId), occurredAt: edge };
  return first > 1 ? { seq: first - 1, occurredAt: edge } : undefined;
}

/**
 * Where a walk from the time `time` begins: just before the first event (of any organization:
 * `seq` is one order for all) that occurred at or after it, or after the organization's last
 * event when none did yet. The position carries `time` as its age, which readEventFeed checked
 * against the retention.
 */
async function positionAt(reads: Knex, orgId: string, time: string): Promise<FeedPosition> {
  const first = await firstSeqAtOrAfter(reads, time);
  if (first === undefined) return { seq: await highestEventSeq(reads, orgId), occurredAt: time };
  return { seq: first - 1, occurredAt: time };
}

/**
 * How much older than the read the cursor at the end of the feed says it is: writes in flight
 * (seconds) and the skew between the API host's clock and the database's (on Postgres events
 * are stamped by the database), which a cursor carrying the read's own time would otherwise have
 * to stay under CURSOR_EXPIRY_MARGIN_MS.
 */
const END_CURSOR_ALLOWANCE_MS = 5 * 60_000;

/**
 * Where a walk that starts after the event `id` begins: that event's place in the feed. A
 * webhook receiver knows the id of the last event it processed (`webhook-id`), not a cursor, so
 * after an outage it resumes from there. An id that is not found is either purged (its time,
 * which the id carries, is older than the retention: 410, as for an old cursor) or not an event
 * of this organization (400: a walk from a wrong place would skip or repeat events).
 */
async function positionOfEvent(reads: Knex, orgId: string, id: string, retentionDays: number): Promise<FeedPosition> {
  const event = await findEvent(reads, orgId, id);
  if (event) return { seq: event.sequence, occurredAt: event.occurredAt };
  // the id's time is the API host's clock, the purge's is the events' (the database's, on
  // Postgres): the same allowance for skew as the end-of-feed cursor
  const made = idCreatedAt(id, 'evt');
  if (made !== undefined && made < Date.parse(retentionCutoff(retentionDays)) + END_CURSOR_ALLOWANCE_MS) {
    throw new ApiError('CURSOR_EXPIRED', `The event afterEvent names is older than the ${retentionDays}-day event retention; resynchronise and walk the feed again from the start`);
  }
  throw validationError(`afterEvent names no event of this organization: ${id}`, [{ path: '/query/afterEvent', message: 'is not the id of an event of this organization' }]);
}

/** The time a feed cursor carries, as the server writes it (an event's occurredAt, or the read's time). */
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * A cursor passed as `after`. Its time decides the 410 of a cursor older than the retention, so
 * one whose time is not a time the server writes, or lies ahead of now by more than the clocks'
 * skew, is refused: taken as it is, it would pass that check and walk on past purged events.
 */
function decodeFeedCursorOrThrow(cursor: string): FeedPosition {
  let position: FeedPosition | undefined;
  try {
    position = decodeFeedCursor(cursor);
  } catch {
    // refused below
  }
  const at = position && CURSOR_TIME.test(position.occurredAt) ? Date.parse(position.occurredAt) : NaN;
  if (!position || Number.isNaN(at) || at > Date.now() + END_CURSOR_ALLOWANCE_MS) {
    throw validationError('after is malformed: pass the nextCursor of the previous page unchanged', [{ path: '/query/after', message: 'is not a cursor issued by this API' }]);
  }
  return position;
}
