import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newIdBatch } from '../../ids';
import { dialectOf } from '../databaseErrors';
import { onSqliteConnection, sendInTransaction, type SqliteStatements } from '../database';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import type { ListFilters } from '../listFilters';
import { insertEventOn, type EventRow } from './eventsRepository';
import { rowsOf } from '../rawRows';
import { selectorsOf, type WebhookSubscriptionRow } from './webhookSubscriptionsRepository';

export type WebhookDelivery = components['schemas']['WebhookDelivery'];
export type WebhookDeliveryStatus = components['schemas']['WebhookDeliveryStatus'];

export interface WebhookDeliveryRow {
  seq: number;
  id: string;
  org_id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  lease_until: string | null;
  lease_token: string | null;
  last_response_status: number | null;
  last_response_excerpt: string | null;
  last_attempt_at: string | null;
  /** When the current retry schedule began; null: when the delivery was made (migrations/0020_delivery_schedule_started_at.ts). */
  schedule_started_at: string | null;
  created_at: string;
  updated_at: string;
}

export type WebhookDeliveryFilters = ListFilters<'listIntegrationSubscriptionDeliveries'>;

/** Statuses a worker may still send. */
export const DUE_STATUSES: readonly WebhookDeliveryStatus[] = ['pending', 'failed'];

export function toDelivery(row: WebhookDeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    subscriptionId: row.subscription_id,
    eventId: row.event_id,
    eventType: row.event_type as WebhookDelivery['eventType'],
    status: row.status,
    attempts: Number(row.attempts),
    lastResponseStatus: row.last_response_status === null ? null : Number(row.last_response_status),
    lastResponseExcerpt: row.last_response_excerpt,
    lastAttemptAt: row.last_attempt_at,
    nextAttemptAt: row.next_attempt_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * SQLite: the subscriptions of the organization that listen to `type`, active or paused (a
 * paused one keeps its backlog for the resume), in the work of onSqliteConnection
 * (storage/database.ts): one indexed lookup, which finds nothing when nobody listens. On Postgres
 * RECORD_EVENT_SQL below looks them up itself.
 */
function listeningSubscriptionsOn(conn: SqliteStatements, orgId: string, type: string): string[] {
  return (conn.prepare(LISTENING_SQL).all(orgId, ...selectorsOf(type)) as { id: string }[]).map((row) => row.id);
}

// fixed text run through the driver: every domain write runs it. The type, its resource's
// pattern and `*`: three seeks of the (org_id, event_type) index; `distinct` keeps one delivery per
// subscription should a list ever hold two entries that take one event (the API never stores one)
const LISTENING_SQL = `select distinct s.id from webhook_subscription_types st
  join webhook_subscriptions s on s.id = st.subscription_id
  where st.org_id = ? and st.event_type in (?, ?, ?) and s.status in ('active', 'paused')`;

/**
 * Records an event and queues one delivery of it per subscription of its organization that
 * listens to its type (active or paused), in the caller's transaction.
 *
 * Postgres: one statement, behind the organization's event lock (the ordered-insert lock of
 * `events`, storage/orderedInsert.ts), which is held until COMMIT and serializes the
 * organization's writers — so every round trip after it is paid by all of them, and the lock,
 * the time, the insert, the subscription lookup and the deliveries are one. The time is the
 * database's clock read under the lock, so occurredAt never goes backwards within an
 * organization, whichever server process writes. Delivery ids are made there: `whd_` and 24
 * hex digits of an MD5 of a random UUID (hex digits are a subset of the ids' alphabet). In a
 * write transaction the statement is sent without waiting (storage/database.ts,
 * sendInTransaction): it is answered with the COMMIT.
 * SQLite has one writer at a time: no lock, `now()` at the insert, the lookup and the event in one
 * synchronous call on the transaction's connection, then the deliveries when someone listens.
 */
export async function insertEventAndQueueDeliveries(
  db: Knex,
  row: Omit<EventRow, 'seq' | 'occurred_at'>,
  now: () => string,
): Promise<void> {
  if (dialectOf(db) !== 'postgres') {
    const { listening, occurredAt } = await onSqliteConnection(db, (conn) => {
      const ids = listeningSubscriptionsOn(conn, row.org_id, row.type);
      const at = now();
      insertEventOn(conn, row, at);
      return { listening: ids, occurredAt: at };
    });
    if (listening.length) await insertDeliveries(db, row.org_id, listening, { id: row.id, type: row.type, occurredAt });
    return;
  }
  const [, pattern] = selectorsOf(row.type);
  await sendInTransaction(db, RECORD_EVENT_SQL, [row.id, row.org_id, row.type, row.resource_id, row.data, row.changed_fields, row.previous_values, row.org_id, pattern]);
}

// `offset 0` keeps the locking subquery a plan node of its own, evaluated before the row (and
// its seq) is formed; a data-modifying WITH runs to completion whether or not the final select
// reads it.
const RECORD_EVENT_SQL = `with recorded as (
    insert into events (id, org_id, type, resource_id, data, changed_fields, previous_values, occurred_at)
    select ?, ?, ?, ?, ?, ?, ?, to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    from (select pg_advisory_xact_lock(hashtext('events'), hashtext(?)) offset 0) as locked
    returning id, org_id, type, seq, occurred_at
  ), queued as (
    insert into webhook_deliveries (id, org_id, subscription_id, event_id, event_type, status, attempts, next_attempt_at, created_at, updated_at)
    select 'whd_' || substr(md5(gen_random_uuid()::text), 1, 24), l.org_id, l.subscription_id, l.id, l.type, 'pending', 0, l.occurred_at, l.occurred_at, l.occurred_at
    from (
      select distinct e.org_id, s.id as subscription_id, e.id, e.type, e.occurred_at
      from recorded e
      join webhook_subscription_types st on st.org_id = e.org_id and st.event_type in (e.type, ?, '*')
      join webhook_subscriptions s on s.id = st.subscription_id and s.status in ('active', 'paused')
    ) l
    returning 1
  )
  select seq, occurred_at from recorded`;

/** Queues one delivery of a new event per subscription of `subscriptionIds`. */
export async function insertDeliveries(db: Knex, orgId: string, subscriptionIds: readonly string[], event: { id: string; type: string; occurredAt: string }): Promise<number> {
  if (!subscriptionIds.length) return 0;
  const ids = newIdBatch('whd', subscriptionIds.length);
  await db('webhook_deliveries').insert(
    subscriptionIds.map((subscriptionId, i) => newDeliveryRow(ids[i], orgId, subscriptionId, event.id, event.type, event.occurredAt)),
  );
  return subscriptionIds.length;
}

function newDeliveryRow(id: string, orgId: string, subscriptionId: string, eventId: string, eventType: string, now: string): Omit<WebhookDeliveryRow, 'seq'> {
  return {
    id, org_id: orgId, subscription_id: subscriptionId, event_id: eventId, event_type: eventType, status: 'pending', attempts: 0,
    next_attempt_at: now, lease_until: null, lease_token: null, last_response_status: null, last_response_excerpt: null,
    last_attempt_at: null, schedule_started_at: null, created_at: now, updated_at: now,
  };
}

/** New deliveries of existing events to one subscription (a replay), in chunks SQLite accepts. */
export async function insertReplayDeliveries(db: Knex, orgId: string, subscriptionId: string, events: readonly { id: string; type: string }[], now: string): Promise<void> {
  for (let i = 0; i < events.length; i += 400) {
    const chunk = events.slice(i, i + 400);
    const ids = newIdBatch('whd', chunk.length);
    await db('webhook_deliveries').insert(chunk.map((e, j) => newDeliveryRow(ids[j], orgId, subscriptionId, e.id, e.type, now)));
  }
}

export async function listDeliveries(db: Knex, orgId: string, subscriptionId: string, filters: WebhookDeliveryFilters, page: PageRequest): Promise<Page<WebhookDelivery>> {
  const query = db<WebhookDeliveryRow>('webhook_deliveries').where({ org_id: orgId, subscription_id: subscriptionId });
  if (filters.status !== undefined) query.where({ status: filters.status });
  if (filters.eventId !== undefined) query.where({ event_id: filters.eventId });
  return fetchPage(query, ['seq'], page, toDelivery);
}

export async function findDeliveryRow(db: Knex, orgId: string, subscriptionId: string, id: string): Promise<WebhookDeliveryRow | undefined> {
  return db<WebhookDeliveryRow>('webhook_deliveries').where({ org_id: orgId, subscription_id: subscriptionId, id }).first();
}

/** Makes a delivery due now again, whatever its state, and drops any lease on it. */
export async function makeDeliveryDueNow(db: Knex, id: string, now: string): Promise<void> {
  await db('webhook_deliveries').where({ id }).update({ ...dueAgain(now), lease_until: null, lease_token: null });
}

/**
 * Makes every delivery of a subscription not yet delivered — held, waiting for a retry, or given
 * up — that was made at or after `since` or failed an attempt then (all when null) due now with a
 * fresh count of attempts. The second half takes in a delivery made before the last success whose
 * attempts went on failing after it: sent concurrently, it was still failing when a later one
 * succeeded, then in the outage that followed.
 */
export async function requeueUndelivered(db: Knex, subscriptionId: string, since: string | null, now: string): Promise<number> {
  const query = notInFlight(db('webhook_deliveries').where({ subscription_id: subscriptionId }).whereIn('status', ['pending', 'failed', 'abandoned']), now);
  if (since !== null) query.andWhere((q) => q.where('created_at', '>=', since).orWhere('last_attempt_at', '>=', since));
  return query.update(dueAgain(now));
}

/**
 * Makes the subscription's deliveries that wait for an attempt (pending or failed) due now with a
 * fresh count of attempts: after a change of target, whose receiver is not the one that failed.
 */
export async function makeWaitingDueNow(db: Knex, subscriptionId: string, now: string): Promise<number> {
  return notInFlight(db('webhook_deliveries').where({ subscription_id: subscriptionId }).whereIn('status', DUE_STATUSES), now)
    .update(dueAgain(now));
}

/** A delivery made due at `now` on a whole new retry schedule (its attempts counted from 0). */
export const dueAgain = (now: string) => ({ status: 'pending' as const, attempts: 0, next_attempt_at: now, schedule_started_at: now, updated_at: now });

/**
 * Leaves out deliveries an engine holds a live lease on: an attempt under way stores its own
 * outcome (fenced on its lease), which a requeue clearing the lease would drop, sending it twice.
 */
function notInFlight(query: Knex.QueryBuilder, now: string): Knex.QueryBuilder {
  return query.andWhere((q) => q.whereNull('lease_until').orWhere('lease_until', '<=', now));
}

/** A claimed delivery with what sending it needs: the event and the subscription's target and secrets. */
export interface ClaimedDelivery {
  delivery: WebhookDeliveryRow;
  event: EventRow;
  subscription: Pick<WebhookSubscriptionRow, 'id' | 'target_url' | 'secret' | 'previous_secret' | 'previous_secret_expires_at'>;
}

/** A due delivery before its claim: its event is null when the retention purged it. */
export interface DueDelivery extends Omit<ClaimedDelivery, 'event'> {
  event: EventRow | null;
}

/**
 * Deliveries not yet delivered nor given up (pending or waiting for a retry), all organizations,
 * counted up to `cap`: counting reads one index entry per delivery (about 33 ms per million on
 * SQLite, where the read holds the process's event loop), and a paused or disabled subscription
 * may hold a backlog of millions, so the count stops at `cap` and answers it.
 */
export async function countUndelivered(db: Knex, cap: number): Promise<number> {
  // pending or failed is exactly having a next attempt (dueSeqs): counted on the due index
  const backlog = db('webhook_deliveries').whereNotNull('next_attempt_at').select(db.raw('1')).limit(cap).as('backlog');
  const [row] = (await db.from(backlog).count({ n: '*' })) as { n: number | string }[];
  return Number(row.n);
}

/**
 * The subscriptions with at least `atLeast` deliveries under way at `now` (a lease not yet run
 * out), read from the index of live leases (migration 0016).
 */
export async function subscriptionsInFlight(db: Knex, now: string, atLeast: number): Promise<Map<string, number>> {
  // SQLite, without statistics, would rather walk (subscription_id, seq) over the whole table to
  // group without sorting (about 100 ms per 300 000 deliveries, on the event loop): told the index
  const table = dialectOf(db) === 'postgres' ? 'webhook_deliveries' : db.raw('webhook_deliveries indexed by webhook_deliveries_leased_index');
  const rows: { subscription_id: string; n: number | string }[] = await db.from(table)
    .where('lease_until', '>', now)
    .groupBy('subscription_id')
    .havingRaw('count(*) >= ?', [atLeast])
    .select('subscription_id', db.raw('count(*) as n'));
  return new Map(rows.map((r) => [r.subscription_id, Number(r.n)]));
}

/** Whether any delivery is due at `now` (a cheap read, so an idle worker never takes the SQLite write lock). */
export async function anyDeliveryDue(db: Knex, now: string, skip: readonly string[] = []): Promise<boolean> {
  return (await dueSeqs(db, now, 1, skip)).length > 0;
}

/**
 * The `seq` of up to `limit` due deliveries of the active subscriptions, the longest due first,
 * found from those subscriptions: for each, its due range of the partial index (subscription_id,
 * next_attempt_at) (migration 0011), in the order they are due. A paused or disabled
 * subscription's backlog, however large, is never read. A delivery has a next attempt exactly
 * while it is pending or failed (every write of its status sets or clears next_attempt_at with
 * it), so the status is not asked again: the index alone answers. On SQLite a cross join fixes
 * the order (subscriptions first), on Postgres a lateral subquery per active subscription (its
 * low cost estimate also keeps Postgres from JIT-compiling the poll).
 */
async function dueSeqs(db: Knex, now: string, limit: number, skip: readonly string[] = []): Promise<number[]> {
  if (dialectOf(db) === 'postgres') {
    // the subscriptions to leave out as one array parameter: one prepared text whatever their number
    return rowsOf<{ seq: number }>(await db.raw(PG_DUE_SQL, [now, now, limit, [...skip], limit])).map((r) => r.seq);
  }
  const rows: { seq: number }[] = await db('webhook_subscriptions as s')
    .crossJoin(db.raw('?? as d', ['webhook_deliveries']))
    .where('s.status', 'active')
    .modify((q) => { if (skip.length) q.whereNotIn('s.id', skip); })
    .where('d.subscription_id', db.ref('s.id'))
    .where('d.next_attempt_at', '<=', now)
    .where((q) => q.whereNull('d.lease_until').orWhere('d.lease_until', '<=', now))
    .orderBy('d.next_attempt_at')
    .limit(limit)
    .select('d.seq');
  return rows.map((r) => r.seq);
}

const PG_DUE_SQL = `select d.seq from webhook_subscriptions s
  cross join lateral (
    select d.seq, d.next_attempt_at from webhook_deliveries d
    where d.subscription_id = s.id and d.next_attempt_at <= ?
      and (d.lease_until is null or d.lease_until <= ?)
    order by d.next_attempt_at limit ?
  ) d
  where s.status = 'active' and s.id <> all(?::text[])
  order by d.next_attempt_at limit ?`;

/**
 * Up to `limit` due deliveries, as they are before any claim, each with its event (null when the
 * retention purged it) and its subscription; on Postgres locked for this transaction. Run it
 * inside a write transaction, then lease or give up each (webhooks/deliveryClaims.ts). On
 * Postgres the candidates (four times `limit`, since workers claiming at the same moment read the
 * same ones) are locked FOR UPDATE SKIP LOCKED, the longest due first, up to `limit`: those another
 * worker holds or has claimed meanwhile (no longer due once its lease was written) are left out,
 * so concurrent workers claim disjoint sets without waiting for each other. SQLite has one writer
 * at a time.
 */
export async function dueDeliveries(trx: Knex, now: string, limit: number, skip: readonly string[] = []): Promise<DueDelivery[]> {
  const rows = await dueRows(trx, now, limit, skip);
  return rows === undefined ? [] : rows.map(toDue);
}

/** Leases deliveries to `token` until `leaseUntil` and counts the attempt each is leased for. */
export async function leaseDeliveries(trx: Knex, seqs: readonly number[], leaseUntil: string, token: string): Promise<void> {
  await trx('webhook_deliveries').whereIn('seq', seqs).update({ lease_until: leaseUntil, lease_token: token, attempts: trx.raw('attempts + 1') });
}

/**
 * Gives deliveries up (`abandoned`, nothing more due) with `reason` as their last error. With
 * `keepLease` their lease token stays, so that an outcome still stored under it is not refused.
 */
export async function abandonDeliveries(trx: Knex, seqs: readonly number[], reason: string, now: string, { keepLease }: { keepLease: boolean }): Promise<void> {
  await trx('webhook_deliveries').whereIn('seq', seqs).update({
    status: 'abandoned', next_attempt_at: null, last_response_excerpt: reason, updated_at: now,
    ...(keepLease ? {} : { lease_until: null, lease_token: null }),
  });
}

/**
 * Up to `limit` due deliveries (locked on Postgres) with their event (null when purged) and
 * subscription, as they are before the claim; undefined when none is due.
 */
async function dueRows(trx: Knex, now: string, limit: number, skip: readonly string[]): Promise<any[] | undefined> {
  const postgres = dialectOf(trx) === 'postgres';
  let seqs = await dueSeqs(trx, now, postgres ? limit * 4 : limit, skip);
  if (seqs.length && postgres) {
    const locked: { seq: number }[] = await trx('webhook_deliveries')
      .whereIn('seq', seqs)
      .whereIn('status', DUE_STATUSES)
      .where('next_attempt_at', '<=', now)
      .where((q) => q.whereNull('lease_until').orWhere('lease_until', '<=', now))
      .orderBy('next_attempt_at')
      .limit(limit)
      .forUpdate()
      .skipLocked()
      .select('seq');
    seqs = locked.map((r) => r.seq);
  }
  if (!seqs.length) return undefined;
  return trx('webhook_deliveries as d')
    .leftJoin('events as e', 'e.id', 'd.event_id')
    .join('webhook_subscriptions as s', 's.id', 'd.subscription_id')
    .whereIn('d.seq', seqs)
    .select(
      'd.*',
      'e.seq as e_seq', 'e.org_id as e_org_id', 'e.type as e_type', 'e.resource_id as e_resource_id', 'e.data as e_data',
      'e.changed_fields as e_changed_fields', 'e.previous_values as e_previous_values', 'e.occurred_at as e_occurred_at',
      's.target_url as s_target_url', 's.secret as s_secret', 's.previous_secret as s_previous_secret',
      's.previous_secret_expires_at as s_previous_secret_expires_at',
    );
}

function toDue(r: any): DueDelivery {
  return {
    delivery: {
      seq: r.seq, id: r.id, org_id: r.org_id, subscription_id: r.subscription_id, event_id: r.event_id, event_type: r.event_type, status: r.status,
      attempts: Number(r.attempts), next_attempt_at: r.next_attempt_at, lease_until: r.lease_until, lease_token: r.lease_token,
      last_response_status: r.last_response_status, last_response_excerpt: r.last_response_excerpt, last_attempt_at: r.last_attempt_at,
      schedule_started_at: r.schedule_started_at, created_at: r.created_at, updated_at: r.updated_at,
    },
    event: r.e_seq === null ? null : { seq: r.e_seq, id: r.event_id, org_id: r.e_org_id, type: r.e_type, resource_id: r.e_resource_id, data: r.e_data, changed_fields: r.e_changed_fields, previous_values: r.e_previous_values, occurred_at: r.e_occurred_at },
    subscription: {
      id: r.subscription_id, target_url: r.s_target_url, secret: r.s_secret, previous_secret: r.s_previous_secret,
      previous_secret_expires_at: r.s_previous_secret_expires_at,
    },
  };
}

/**
 * Deliveries created before the events' retention, with their attempts: their events are purged
 * (or about to be), so they can never be sent. The deliveries first, then their attempts: the
 * order every transaction takes them in (a subscription, its deliveries, their attempts), so that
 * a purge and a subscription's deletion reaching the same rows never deadlock on Postgres.
 */
export async function deleteDeliveriesBefore(db: Knex, createdBefore: string, batch: number): Promise<number> {
  const orphans: { seq: number; id: string }[] = await db('webhook_deliveries').select('seq', 'id').where('created_at', '<', createdBefore).limit(batch);
  if (!orphans.length) return 0;
  const deleted = await db('webhook_deliveries').whereIn('seq', orphans.map((o) => o.seq)).delete();
  await db('webhook_delivery_attempts').whereIn('delivery_id', orphans.map((o) => o.id)).delete();
  return deleted;
}

export type WebhookDeliveryAttempt = components['schemas']['WebhookDeliveryAttempt'];

export interface WebhookDeliveryAttemptRow {
  org_id: string;
  subscription_id: string;
  delivery_id: string;
  attempt: number;
  target_url: string;
  started_at: string;
  duration_ms: number;
  outcome: WebhookDeliveryAttempt['outcome'];
  response_status: number | null;
  response_excerpt: string | null;
}

/** An attempt that got an outcome (the delivery engine, in the transaction that stores it on the delivery). */
export async function insertDeliveryAttempt(db: Knex, row: WebhookDeliveryAttemptRow): Promise<void> {
  await db('webhook_delivery_attempts').insert(row);
}

/**
 * When the first attempt of the delivery's current retry schedule ended: the first attempt with an
 * outcome that started once the schedule began (`schedule_started_at`, else `created_at`);
 * undefined before it has one.
 */
export async function firstAttemptEndOf(db: Knex, delivery: Pick<WebhookDeliveryRow, 'id' | 'schedule_started_at' | 'created_at'>): Promise<string | undefined> {
  const row: Pick<WebhookDeliveryAttemptRow, 'started_at' | 'duration_ms'> | undefined = await db('webhook_delivery_attempts')
    .where({ delivery_id: delivery.id }).where('started_at', '>=', delivery.schedule_started_at ?? delivery.created_at).orderBy('seq').first('started_at', 'duration_ms');
  return row && new Date(Date.parse(row.started_at) + Number(row.duration_ms)).toISOString();
}

/** The latest `limit` attempts of a delivery, oldest first. */
export async function listDeliveryAttempts(db: Knex, deliveryId: string, limit: number): Promise<WebhookDeliveryAttempt[]> {
  const rows: WebhookDeliveryAttemptRow[] = await db('webhook_delivery_attempts').where({ delivery_id: deliveryId }).orderBy('seq', 'desc').limit(limit);
  return rows.reverse().map((r) => ({
    attempt: Number(r.attempt),
    targetUrl: r.target_url,
    startedAt: r.started_at,
    durationMs: Number(r.duration_ms),
    outcome: r.outcome,
    responseStatus: r.response_status === null ? null : Number(r.response_status),
    responseExcerpt: r.response_excerpt,
  }));
}

/**
 * Up to `batch` attempts that started before `startedBefore`: the retention purge's sweep for
 * attempts whose delivery went another way (deleteDeliveriesBefore takes each delivery's own).
 */
export async function deleteAttemptsBefore(db: Knex, startedBefore: string, batch: number): Promise<number> {
  const old = db('webhook_delivery_attempts').select('seq').where('started_at', '<', startedBefore).limit(batch);
  return db('webhook_delivery_attempts').whereIn('seq', old).delete();
}

/**
 * Stores the outcome of an attempt, fenced on the lease token: when the lease ran out and
 * another worker claimed the delivery meanwhile, this worker's outcome is dropped (false).
 */
export async function finishAttempt(db: Knex, id: string, token: string, columns: Partial<WebhookDeliveryRow>): Promise<boolean> {
  const updated = await db('webhook_deliveries')
    .where({ id, lease_token: token })
    .update({ ...columns, lease_until: null, lease_token: null });
  return updated > 0;
}
