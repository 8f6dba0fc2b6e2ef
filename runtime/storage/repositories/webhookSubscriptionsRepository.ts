import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import type { ListFilters } from '../listFilters';
import { translateErrors } from '../databaseErrors';

export type WebhookSubscription = components['schemas']['WebhookSubscription'];
type WebhookSubscriptionStatus = components['schemas']['WebhookSubscriptionStatus'];
type DisabledReason = NonNullable<WebhookSubscription['disabledReason']>;
type EventTypeSelection = components['schemas']['EventTypeSelection'];

export interface WebhookSubscriptionRow {
  seq: number;
  id: string;
  org_id: string;
  partner: string;
  trigger_key: string | null;
  /** The subscription's event types, sorted and comma-joined: with the target, what makes it unique. */
  match_key: string;
  target_url: string;
  status: WebhookSubscriptionStatus;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  disabled_reason: DisabledReason | null;
  disabled_at: string | null;
  last_success_at: string | null;
  created_at: string;
  updated_at: string;
}

export type WebhookSubscriptionFilters = ListFilters<'listIntegrationSubscriptions'>;

export function toSubscription(row: WebhookSubscriptionRow): WebhookSubscription {
  return {
    id: row.id,
    partner: row.partner,
    triggerKey: row.trigger_key,
    eventTypes: row.match_key.split(',') as EventTypeSelection[],
    targetUrl: row.target_url,
    status: row.status,
    disabledReason: row.disabled_reason,
    disabledAt: row.disabled_at,
    lastSuccessAt: row.last_success_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export const matchKeyOf = (types: readonly string[]): string => [...new Set(types)].sort().join(',');

export async function listWebhookSubscriptions(
  db: Knex,
  orgId: string,
  partner: string,
  filters: WebhookSubscriptionFilters,
  page: PageRequest,
): Promise<Page<WebhookSubscription>> {
  const query = db<WebhookSubscriptionRow>('webhook_subscriptions').where({ org_id: orgId, partner });
  if (filters.triggerKey !== undefined) {
    // one equality per selector, each a search of the (org_id, event_type) index: with an `in` of
    // the three, Postgres chose to read all of the organization's rows and filter them on the rows
    // test/listFilterIndexes.test.ts seeds
    const listening = (selector: string) => db('webhook_subscription_types').select('subscription_id').where({ org_id: orgId, event_type: selector });
    const [type, ...patterns] = selectorsOf(filters.triggerKey);
    query.whereIn('id', listening(type).unionAll(patterns.map(listening)));
  }
  if (filters.status !== undefined) query.where({ status: filters.status });
  return fetchPage(query, ['seq'], page, toSubscription);
}

/**
 * Inserts the subscription and its event types unless the organization already has one for the
 * same partner, target and types; answers the row that exists afterwards and whether it is new.
 */
export async function insertSubscriptionIfAbsent(db: Knex, row: Omit<WebhookSubscriptionRow, 'seq'>): Promise<{ row: WebhookSubscriptionRow; created: boolean }> {
  await lockForOrderedInsert(db, 'webhook_subscriptions', row.org_id);
  const inserted = await db('webhook_subscriptions').insert(row).onConflict(['org_id', 'partner', 'target_url', 'match_key']).ignore().returning('id');
  const created = inserted.length > 0;
  if (created) await db('webhook_subscription_types').insert(typeRows(row.org_id, row.id, row.match_key));
  const existing = await db<WebhookSubscriptionRow>('webhook_subscriptions')
    .where({ org_id: row.org_id, partner: row.partner, target_url: row.target_url, match_key: row.match_key })
    .first();
  return { row: existing!, created };
}

/** The subscription; `forUpdate` locks its row until the transaction ends (Postgres; SQLite's writer lock does it). */
export async function findSubscriptionRow(db: Knex, orgId: string, partner: string, id: string, { forUpdate = false } = {}): Promise<WebhookSubscriptionRow | undefined> {
  const query = db<WebhookSubscriptionRow>('webhook_subscriptions').where({ org_id: orgId, partner, id }).first();
  return forUpdate ? query.forUpdate() : query;
}

/** The organization and partner's subscription with this target and these types, if any. */
export async function findSubscriptionWith(db: Knex, orgId: string, partner: string, targetUrl: string, matchKey: string): Promise<WebhookSubscriptionRow | undefined> {
  return db<WebhookSubscriptionRow>('webhook_subscriptions').where({ org_id: orgId, partner, target_url: targetUrl, match_key: matchKey }).first();
}

/**
 * Updates the subscription's columns. A change of `match_key` replaces its rows in
 * `webhook_subscription_types` with it. A target and types another subscription of the
 * organization and partner already has are refused by the unique index (UniqueViolation).
 */
export async function updateSubscriptionRow(db: Knex, orgId: string, id: string, columns: Partial<WebhookSubscriptionRow>): Promise<void> {
  await translateErrors(db, 'webhook_subscriptions', () => db('webhook_subscriptions').where({ org_id: orgId, id }).update(columns));
  if (columns.match_key !== undefined) {
    await db('webhook_subscription_types').where({ org_id: orgId, subscription_id: id }).delete();
    await db('webhook_subscription_types').insert(typeRows(orgId, id, columns.match_key));
  }
}

/**
 * One row per entry of `matchKey` — an event type or a pattern (`*`, `<resource>.*`) as listed —
 * through which recording an event finds its subscriptions (selectorsOf).
 */
const typeRows = (orgId: string, subscriptionId: string, matchKey: string) =>
  matchKey.split(',').map((type) => ({ subscription_id: subscriptionId, org_id: orgId, event_type: type }));

/**
 * The rows of `webhook_subscription_types` that take an event of `type`: the type itself, its
 * resource's pattern and `*`. A subscription never lists two of them (its list is normalized:
 * domain/eventTypes.ts, normalizeSelections), so it matches once.
 */
export const selectorsOf = (type: string): [string, string, string] => [type, `${type.slice(0, type.indexOf('.'))}.*`, '*'];

/**
 * Deletes the subscription, its event types, its deliveries and their attempts. The caller holds
 * the subscription's row lock (findSubscriptionRow with forUpdate), taken before any of these rows.
 */
export async function deleteSubscriptionRows(db: Knex, orgId: string, id: string): Promise<boolean> {
  await db('webhook_subscription_types').where({ org_id: orgId, subscription_id: id }).delete();
  await db('webhook_deliveries').where({ org_id: orgId, subscription_id: id }).delete();
  await db('webhook_delivery_attempts').where({ org_id: orgId, subscription_id: id }).delete();
  return (await db('webhook_subscriptions').where({ org_id: orgId, id }).delete()) > 0;
}

/** Records a successful delivery (the `failing` rule looks at it). */
export async function markSubscriptionSucceeded(db: Knex, id: string, at: string): Promise<void> {
  await db('webhook_subscriptions').where({ id }).andWhere((q) => q.whereNull('last_success_at').orWhere('last_success_at', '<', at)).update({ last_success_at: at });
}

/** Disables an active or paused subscription; false when it was already disabled or is gone. */
export async function disableSubscription(db: Knex, id: string, reason: DisabledReason, at: string): Promise<boolean> {
  return (await db('webhook_subscriptions').where({ id }).whereNot({ status: 'disabled' }).update({ status: 'disabled', disabled_reason: reason, disabled_at: at, updated_at: at })) > 0;
}

/**
 * The subscription's target, latest success and latest change as they are now, read with a lock
 * until the transaction ends; undefined when it is gone.
 */
export async function lockSubscription(db: Knex, id: string): Promise<Pick<WebhookSubscriptionRow, 'target_url' | 'last_success_at' | 'updated_at'> | undefined> {
  return db<WebhookSubscriptionRow>('webhook_subscriptions').where({ id }).first('target_url', 'last_success_at', 'updated_at').forUpdate();
}
