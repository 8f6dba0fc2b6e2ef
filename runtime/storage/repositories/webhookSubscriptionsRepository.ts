import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import type { ListFilters } from '../listFilters';

export type WebhookSubscription = components['schemas']['WebhookSubscription'];
type WebhookSubscriptionStatus = components['schemas']['WebhookSubscriptionStatus'];

interface WebhookSubscriptionRow {
  seq: number;
  id: string;
  org_id: string;
  partner: string;
  trigger_key: string;
  target_url: string;
  status: WebhookSubscriptionStatus;
  created_at: string;
  updated_at: string;
}

export type WebhookSubscriptionFilters = ListFilters<'listIntegrationSubscriptions'>;

function toSubscription(row: WebhookSubscriptionRow): WebhookSubscription {
  return {
    id: row.id,
    partner: row.partner,
    triggerKey: row.trigger_key,
    targetUrl: row.target_url,
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function listWebhookSubscriptions(
  db: Knex,
  orgId: string,
  partner: string,
  filters: WebhookSubscriptionFilters,
  page: PageRequest,
): Promise<Page<WebhookSubscription>> {
  const query = db<WebhookSubscriptionRow>('webhook_subscriptions').where({ org_id: orgId, partner });
  if (filters.triggerKey !== undefined) query.where({ trigger_key: filters.triggerKey });
  if (filters.status !== undefined) query.where({ status: filters.status });
  return fetchPage(query, ['seq'], page, toSubscription);
}
