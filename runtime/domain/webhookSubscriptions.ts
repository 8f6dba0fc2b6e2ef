import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { alreadyExists, ApiError, notFound, validationError } from '../errors';
import { UniqueViolation } from '../storage/databaseErrors';
import { newId } from '../ids';
import { normalizeTimestamp, nowIso } from '../time';
import { checkTarget } from './webhookTargets';
import { newSigningSecret, signatureHeaders, signingSecrets } from './webhookSigning';
import { accepted, postWebhook } from './webhookSend';
import { isKnownPartner } from './integrationCatalog';
import { retentionCutoff } from './events';
import { eventIdsInWindow } from '../storage/repositories/eventsRepository';
import { normalizeSelections, typesSelected, type EventTypeSelection } from './eventTypes';
import {
  deleteSubscriptionRows,
  findSubscriptionRow,
  findSubscriptionWith,
  insertSubscriptionIfAbsent,
  matchKeyOf,
  toSubscription,
  updateSubscriptionRow,
  WebhookSubscription,
  WebhookSubscriptionRow,
} from '../storage/repositories/webhookSubscriptionsRepository';
import { findDeliveryRow, insertReplayDeliveries, listDeliveries, listDeliveryAttempts, makeDeliveryDueNow, makeWaitingDueNow, requeueUndelivered, toDelivery, WebhookDelivery, type WebhookDeliveryFilters } from '../storage/repositories/webhookDeliveriesRepository';
import type { Page, PageRequest } from '../cursor';

/**
 * The writes of webhook subscriptions (REST hooks) and of their deliveries: target rules,
 * "same target and types answers the existing one", secrets and their rotation, pause/resume,
 * redelivery and replay. Every write goes through the request's transaction `db`.
 */

type SubscriptionCreate = components['schemas']['WebhookSubscriptionCreate'];
type SubscriptionUpdate = components['schemas']['WebhookSubscriptionUpdate'];
type SubscriptionWithSecret = components['schemas']['WebhookSubscriptionWithSecret'];

/** How long a rotated-out secret keeps signing, so receivers can switch without losing events. */
export const PREVIOUS_SECRET_HOURS = 24;
/** At most this many deliveries per replay request. */
export const MAX_REPLAY = 10_000;

export interface WebhookRules {
  allowPrivateTargets: boolean;
  retentionDays: number;
}

function knownPartner(partner: string): void {
  if (!isKnownPartner(partner)) throw notFound(`No integration partner named ${partner}`);
}

/**
 * The subscription, or 404. `forUpdate` (before a change of it) locks its row on Postgres until
 * the request's transaction ends, as every update locks what it read: the delivery engine
 * disables a subscription in its own transaction, and a change computed from a row read before
 * that commit would undo the disabling without requeueing what it gave up.
 */
async function subscriptionRow(db: Knex, orgId: string, partner: string, id: string, { forUpdate = false } = {}): Promise<WebhookSubscriptionRow> {
  knownPartner(partner);
  const row = await findSubscriptionRow(db, orgId, partner, id, { forUpdate });
  if (!row) throw notFound('subscription', id);
  return row;
}

/** A subscription request whose target passed the address check (checkSubscriptionTarget). */
export type CheckedSubscriptionCreate = SubscriptionCreate & { readonly [targetChecked]: true };
/** A change of a subscription whose target, if it has one, passed the address check. */
export type CheckedSubscriptionUpdate = SubscriptionUpdate & { readonly [targetChecked]: true };
declare const targetChecked: unique symbol;

/**
 * The target rules of a new subscription (domain/webhookTargets.ts), which resolve the target's
 * host: run it before the operation's transaction begins, never inside it (a transaction held
 * open across a DNS lookup holds, on SQLite, every other write of the process; http/handler.ts,
 * `prepare`, which also says where Postgres differs). createSubscription takes only a request
 * that went through it.
 */
export async function checkSubscriptionTarget(partner: string, input: SubscriptionCreate, rules: Pick<WebhookRules, 'allowPrivateTargets'>): Promise<CheckedSubscriptionCreate>;
export async function checkSubscriptionTarget(partner: string, input: SubscriptionUpdate, rules: Pick<WebhookRules, 'allowPrivateTargets'>): Promise<CheckedSubscriptionUpdate>;
export async function checkSubscriptionTarget(partner: string, input: SubscriptionCreate | SubscriptionUpdate, rules: Pick<WebhookRules, 'allowPrivateTargets'>) {
  knownPartner(partner);
  if (input.targetUrl !== undefined) await checkTarget(input.targetUrl, rules.allowPrivateTargets);
  return input;
}

export async function createSubscription(
  db: Knex,
  orgId: string,
  partner: string,
  input: CheckedSubscriptionCreate,
): Promise<{ created: true; subscription: SubscriptionWithSecret } | { created: false; subscription: WebhookSubscription }> {
  knownPartner(partner);
  const types = normalizeSelections(input.triggerKey !== undefined ? [input.triggerKey] : (input.eventTypes ?? []));
  const now = nowIso();
  const secret = newSigningSecret();
  const { row, created } = await insertSubscriptionIfAbsent(db, {
    id: newId('whs'),
    org_id: orgId,
    partner,
    trigger_key: input.triggerKey ?? null,
    match_key: matchKeyOf(types),
    target_url: input.targetUrl,
    status: 'active',
    secret,
    previous_secret: null,
    previous_secret_expires_at: null,
    disabled_reason: null,
    disabled_at: null,
    last_success_at: null,
    created_at: now,
    updated_at: now,
  });
  return created ? { created, subscription: { ...toSubscription(row), secret } } : { created, subscription: toSubscription(row) };
}

export async function getSubscription(db: Knex, orgId: string, partner: string, id: string): Promise<WebhookSubscription> {
  return toSubscription(await subscriptionRow(db, orgId, partner, id));
}

/**
 * Changes the subscription's status, target or event types (docs/webhooks.md, "Changing a
 * subscription"); a field left out keeps its value, and so does the secret.
 *
 * - `status`: pauses or resumes; either also re-enables a disabled subscription. Re-enabled,
 *   it sends again (once active), each with a whole new retry schedule, every delivery made since its last
 *   success that was not delivered: those it held, and those given up — among them the one whose
 *   failed schedule disabled it, or the one answered 410. Events recorded while it was disabled
 *   were never queued for it (recording queues for active and paused subscriptions only);
 *   docs/webhooks.md tells receivers to replay that window or walk the feed.
 * - `targetUrl`: the engine reads the target when it claims a delivery, so every delivery not yet
 *   made goes to the new one; those waiting for a retry become due now, with a new schedule (a
 *   new receiver is not the one that failed). An attempt already under way to the old target
 *   finishes there, and its failure neither counts against the new target nor disables the
 *   subscription (runtime/webhooks/deliveryWorker.ts).
 * - the event types: recording looks the listening subscriptions up at each event, so the new
 *   types apply from the next event; deliveries already queued stay queued.
 * - another subscription of the organization and partner with the same target and exactly the
 *   same types is 409 ALREADY_EXISTS, naming it, as it would be a second stream of the same
 *   events (the unique index refuses a race between two such changes alike).
 */
export async function updateSubscription(db: Knex, orgId: string, partner: string, id: string, input: CheckedSubscriptionUpdate): Promise<WebhookSubscription> {
  const row = await subscriptionRow(db, orgId, partner, id, { forUpdate: true });
  const changes: Partial<WebhookSubscriptionRow> = {};
  if (input.targetUrl !== undefined && input.targetUrl !== row.target_url) changes.target_url = input.targetUrl;
  const types = input.triggerKey !== undefined ? [input.triggerKey] : input.eventTypes && normalizeSelections(input.eventTypes);
  if (types !== undefined) {
    const matchKey = matchKeyOf(types);
    if (matchKey !== row.match_key) changes.match_key = matchKey;
    const triggerKey = input.triggerKey ?? null;
    if (triggerKey !== row.trigger_key) changes.trigger_key = triggerKey;
  }
  if (input.status !== undefined && input.status !== row.status) Object.assign(changes, { status: input.status, disabled_reason: null, disabled_at: null });
  if (Object.keys(changes).length === 0) return toSubscription(row);
  const now = nowIso();
  changes.updated_at = now;
  const equal = (other?: string) => alreadyExists(`Another subscription of partner ${partner}${other ? ` (${other})` : ''} already sends exactly these event types to this target`);
  if (changes.target_url !== undefined || changes.match_key !== undefined) {
    const other = await findSubscriptionWith(db, orgId, partner, changes.target_url ?? row.target_url, changes.match_key ?? row.match_key);
    if (other && other.id !== id) throw equal(other.id);
  }
  try {
    await updateSubscriptionRow(db, orgId, id, changes);
  } catch (err) {
    if (err instanceof UniqueViolation) throw equal();
    throw err;
  }
  // leaving `disabled`, to `active` or to `paused` (which then holds them until resumed)
  if (row.status === 'disabled' && changes.status !== undefined) await requeueUndelivered(db, id, row.last_success_at, now);
  if (changes.target_url !== undefined) await makeWaitingDueNow(db, id, now);
  return toSubscription({ ...row, ...changes });
}

/** What the API shows of a delivery: while its subscription is paused or disabled nothing is due, so `nextAttemptAt` is null. */
function shownDelivery<T extends WebhookDelivery>(subscription: WebhookSubscriptionRow, delivery: T): T {
  return subscription.status === 'active' ? delivery : { ...delivery, nextAttemptAt: null };
}

/**
 * A subscription's deliveries. While it is paused or disabled nothing is due: `nextAttemptAt`
 * is null then, whatever the delivery's own schedule says (it applies again once active).
 */
export async function listSubscriptionDeliveries(
  db: Knex, orgId: string, partner: string, id: string, filters: WebhookDeliveryFilters, page: PageRequest,
): Promise<Page<WebhookDelivery>> {
  const subscription = await subscriptionRow(db, orgId, partner, id);
  const listed = await listDeliveries(db, orgId, id, filters, page);
  return { ...listed, data: listed.data.map((delivery) => shownDelivery(subscription, delivery)) };
}

/** At most this many attempts in a delivery's `attemptHistory` (the latest). */
export const ATTEMPT_HISTORY_LIMIT = 50;

/** One delivery with its attempts that have an outcome; `nextAttemptAt` as listSubscriptionDeliveries says. */
export async function getSubscriptionDelivery(
  db: Knex, orgId: string, partner: string, id: string, deliveryId: string,
): Promise<components['schemas']['WebhookDeliveryWithAttempts']> {
  const subscription = await subscriptionRow(db, orgId, partner, id);
  const row = await findDeliveryRow(db, orgId, id, deliveryId);
  if (!row) throw notFound('delivery', deliveryId);
  const attemptHistory = await listDeliveryAttempts(db, row.id, ATTEMPT_HISTORY_LIMIT);
  return shownDelivery(subscription, { ...toDelivery(row), attemptHistory });
}

/**
 * Deletes the subscription with its types, deliveries and attempts; 404 when the partner has no
 * such subscription. Its row is locked first, the order the delivery engine takes the subscription
 * and then a delivery in when it stores an attempt (deliveryWorker.ts, storeOutcome): deleting the
 * deliveries first deadlocked with it on Postgres. Holding the lock also means an attempt the
 * engine was storing has committed, so its row is deleted with the others.
 */
export async function deleteSubscription(db: Knex, orgId: string, partner: string, id: string): Promise<void> {
  await subscriptionRow(db, orgId, partner, id, { forUpdate: true });
  if (!(await deleteSubscriptionRows(db, orgId, id))) throw notFound('subscription', id);
}

/** A new secret; the previous one keeps signing for PREVIOUS_SECRET_HOURS. */
export async function rotateSubscriptionSecret(db: Knex, orgId: string, partner: string, id: string): Promise<SubscriptionWithSecret> {
  const row = await subscriptionRow(db, orgId, partner, id, { forUpdate: true });
  const now = Date.now();
  const changes = {
    secret: newSigningSecret(),
    previous_secret: row.secret,
    previous_secret_expires_at: new Date(now + PREVIOUS_SECRET_HOURS * 3_600_000).toISOString(),
    updated_at: new Date(now).toISOString(),
  };
  await updateSubscriptionRow(db, orgId, id, changes);
  return { ...toSubscription({ ...row, ...changes }), secret: changes.secret };
}

type PingResult = components['schemas']['WebhookPingResult'];
type PingMessage = components['schemas']['WebhookPing'];

/**
 * Sends one signed `webhook.ping` to the subscription's target and answers what the target
 * answered (the contract's `pingIntegrationSubscription`). Whatever the subscription's status:
 * a receiver is checked before a paused one is resumed or a disabled one re-enabled. Nothing is
 * stored and nothing is retried — it is not an event, and its outcome is the caller's to read,
 * not the subscription's (no last success, never disables). `reads` is a handle outside any
 * transaction: the answer is waited for, up to the delivery timeout, and no transaction may be
 * held open across that (http/handler.ts, `prepare`).
 */
export async function pingSubscription(
  reads: Knex, orgId: string, partner: string, id: string,
  settings: { timeoutSeconds: number; allowPrivateTargets: boolean },
): Promise<PingResult> {
  // the wait is the target's, which the caller chooses; on Postgres a keyed request holds a
  // pooled connection meanwhile (http/handler.ts, `prepare`), so a process waits on a few at most,
  // and one organization on fewer, so that its slow receiver cannot keep the others' pings out
  const ours = pingsUnderWayOf.get(orgId) ?? 0;
  if (ours >= MAX_PINGS_PER_ORGANIZATION) {
    throw new ApiError('RATE_LIMITED', `${MAX_PINGS_PER_ORGANIZATION} test messages of this organization are under way in this server process; send another once one is answered`, undefined, { 'Retry-After': '1' });
  }
  if (pingsUnderWay >= MAX_PINGS_UNDER_WAY) {
    throw new ApiError('SERVICE_UNAVAILABLE', `${MAX_PINGS_UNDER_WAY} test messages are under way in this server process; retry in a moment`, undefined, { 'Retry-After': '1' });
  }
  pingsUnderWay++;
  pingsUnderWayOf.set(orgId, ours + 1);
  try {
    return await sendPing(reads, orgId, partner, id, settings);
  } finally {
    pingsUnderWay--;
    const left = pingsUnderWayOf.get(orgId)! - 1;
    if (left) pingsUnderWayOf.set(orgId, left);
    else pingsUnderWayOf.delete(orgId);
  }
}

/** Test messages waiting for their target's answer in this process (pingSubscription): all, and per organization. */
let pingsUnderWay = 0;
const pingsUnderWayOf = new Map<string, number>();
/**
 * Bounds on this process's own resources (its database pool), not shared budgets: per process.
 * An organization over its own share is answered 429 (its doing); the process full of several
 * organizations' pings 503 (the server's).
 */
export const MAX_PINGS_UNDER_WAY = 4;
export const MAX_PINGS_PER_ORGANIZATION = 2;

async function sendPing(
  reads: Knex, orgId: string, partner: string, id: string,
  settings: { timeoutSeconds: number; allowPrivateTargets: boolean },
): Promise<PingResult> {
  const row = await subscriptionRow(reads, orgId, partner, id);
  const sentAt = new Date();
  const message: PingMessage = {
    id: newId('ping'),
    type: 'webhook.ping',
    timestamp: sentAt.toISOString(),
    data: { subscriptionId: row.id, partner: row.partner, eventTypes: toSubscription(row).eventTypes },
  };
  const body = JSON.stringify(message);
  const outcome = await postWebhook(row.target_url, signatureHeaders(message.id, body, signingSecrets(row, sentAt), sentAt), body, {
    timeoutMs: settings.timeoutSeconds * 1000,
    allowPrivate: settings.allowPrivateTargets,
  });
  return {
    id: message.id,
    targetUrl: row.target_url,
    sentAt: message.timestamp,
    durationMs: Math.max(0, Date.now() - sentAt.getTime()),
    succeeded: accepted(outcome),
    responseStatus: outcome.status,
    responseExcerpt: outcome.excerpt,
  };
}

export async function retryDelivery(db: Knex, orgId: string, partner: string, subscriptionId: string, deliveryId: string): Promise<WebhookDelivery> {
  // the subscription's row before the delivery's, the order of every transaction that takes both
  // (deleteSubscription): on Postgres one transaction may carry several requests (a group commit)
  const subscription = await subscriptionRow(db, orgId, partner, subscriptionId, { forUpdate: true });
  const row = await findDeliveryRow(db, orgId, subscriptionId, deliveryId);
  if (!row) throw notFound('delivery', deliveryId);
  const now = nowIso();
  await makeDeliveryDueNow(db, row.id, now);
  // due now, and sent now unless the subscription is paused or disabled: then it waits, as shown
  return shownDelivery(subscription, toDelivery({ ...row, status: 'pending', attempts: 0, next_attempt_at: now, lease_until: null, lease_token: null, updated_at: now }));
}

/** Queues a new delivery of every event of the subscription's types in [from, to). */
export async function replayEvents(
  db: Knex,
  orgId: string,
  partner: string,
  subscriptionId: string,
  window: { from: string; to: string },
  rules: WebhookRules,
): Promise<{ replayed: number }> {
  const row = await subscriptionRow(db, orgId, partner, subscriptionId);
  const from = normalizeTimestamp(window.from);
  const to = normalizeTimestamp(window.to);
  if (to <= from) throw new ApiError('VALIDATION_ERROR', '/to must be after /from', [{ path: '/to', message: 'must be after from' }]);
  const start = from < retentionCutoff(rules.retentionDays) ? retentionCutoff(rules.retentionDays) : from;
  const events = await eventIdsInWindow(db, orgId, typesSelected(row.match_key.split(',') as EventTypeSelection[]), start, to, MAX_REPLAY + 1);
  if (events.length > MAX_REPLAY) throw validationError(`The window holds more than ${MAX_REPLAY} events: replay it in narrower windows`, [{ path: '/to', message: `window holds more than ${MAX_REPLAY} events` }]);
  await insertReplayDeliveries(db, orgId, subscriptionId, events, nowIso());
  return { replayed: events.length };
}
