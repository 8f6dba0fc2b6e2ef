import type { components } from '../../generated/types';
import { operations, OperationId } from '../../generated/operations';
import { decodeCursor, encodeCursor, type Page, type PageRequest } from '../cursor';

export type IntegrationAction = components['schemas']['IntegrationAction'];
export type IntegrationTrigger = components['schemas']['IntegrationTrigger'];

/**
 * What integration partners can do with the API. The catalogue is code, not data: it changes
 * with releases (new keys may be added within v1, none removed) and is the same for every
 * organization. An action names only its operation; method, path and scopes are read from the
 * contract's operation index so they can never drift from the operation itself.
 */
interface ActionEntry {
  key: string;
  name: string;
  description: string;
  operationId: OperationId;
}

interface Partner {
  /** A webhook delivery provider only receives events; it has no actions to call. */
  actions: readonly ActionEntry[];
  triggers: readonly IntegrationTrigger[];
}

const SAMPLE_TIME = '2026-11-22T04:19:50.123Z';

const ACTIONS: readonly ActionEntry[] = [
  { key: 'complete_run', name: 'Complete an inspection', description: 'Completes an inspection run once every required item is answered; records its score and failed items.', operationId: 'completeRun' },
  { key: 'create_checkin', name: 'Plan or start a check-in', description: 'Records a planned arrival (pre_checkin) or a walk-in (active) of a worker at a site.', operationId: 'createCheckin' },
  { key: 'create_asset', name: 'Register an asset', description: 'Registers a piece of equipment at a site.', operationId: 'createAsset' },
  { key: 'create_issue', name: 'Raise an issue', description: 'Raises an issue, e.g. from a failed inspection item or an alarm in another system.', operationId: 'createIssue' },
  { key: 'create_log', name: 'Add a log entry', description: 'Appends a comment, note or status entry to an entity (a check-in, an issue, …).', operationId: 'createLog' },
  { key: 'ingest_sensor_readings', name: 'Send sensor readings', description: 'Ingests a batch of 1 to 1000 sensor readings; readings already received are skipped.', operationId: 'ingestSensorReadings' },
  { key: 'start_run', name: 'Start an inspection', description: 'Starts an inspection run of a template at a site for a worker.', operationId: 'createRun' },
  { key: 'update_checkin', name: 'Check a worker in or out', description: 'Moves a check-in to active (with coordinates) or checked_out.', operationId: 'updateCheckin' },
  { key: 'update_issue', name: 'Update an issue', description: 'Changes an issue: assign it, change its priority, resolve or close it.', operationId: 'updateIssue' },
];

function event(type: string, data: Record<string, unknown>): IntegrationTrigger['samplePayload'] {
  return { id: `evt_sample_${type.replace('.', '_')}`, type, occurredAt: SAMPLE_TIME, data };
}

const sampleCheckin = {
  id: 'chk_5t7w1x9z2c4v6b8n0m3k5j7h', userId: 'auth0|5f1c2a9e', siteId: 'site_8f3k2m9q4t7w1x5z6c0v2b8n',
};
const sampleIssue = {
  id: 'iss_7n3b5v9c1x4z6m8k2q0w3e5r', title: 'Oil leak under transformer T1', description: null, status: 'open', priority: 'high',
  siteId: 'site_8f3k2m9q4t7w1x5z6c0v2b8n', assetId: 'ast_4k9m2q7t1x5z8c3v6b0n2p4r', runId: 'run_2h6j8k0m3n5p7q9r1s4t6v8w',
  assigneeUserId: null, dueAt: null, resolvedAt: null, closedAt: null, createdAt: SAMPLE_TIME, updatedAt: SAMPLE_TIME,
};

const TRIGGERS: readonly IntegrationTrigger[] = [
  {
    key: 'checkin.activated', name: 'Worker checked in', resource: 'checkin',
    description: 'A check-in became active: the worker is on site.',
    samplePayload: event('checkin.activated', { ...sampleCheckin, status: 'active', checkedInAt: SAMPLE_TIME, withinGeofence: true, suspicious: false }),
  },
  {
    key: 'checkin.checked_out', name: 'Worker checked out', resource: 'checkin',
    description: 'A check-in was checked out: the worker left the site.',
    samplePayload: event('checkin.checked_out', { ...sampleCheckin, status: 'checked_out', checkedOutAt: SAMPLE_TIME }),
  },
  {
    key: 'issue.closed', name: 'Issue closed', resource: 'issue',
    description: 'An issue was closed.',
    samplePayload: event('issue.closed', { ...sampleIssue, status: 'closed', closedAt: SAMPLE_TIME }),
  },
  {
    key: 'issue.created', name: 'Issue raised', resource: 'issue',
    description: 'An issue was raised.',
    samplePayload: event('issue.created', sampleIssue),
  },
  {
    key: 'issue.resolved', name: 'Issue resolved', resource: 'issue',
    description: 'An issue was marked resolved.',
    samplePayload: event('issue.resolved', { ...sampleIssue, status: 'resolved', resolvedAt: SAMPLE_TIME }),
  },
  {
    key: 'run.completed', name: 'Inspection completed', resource: 'run',
    description: 'An inspection run was completed, with its score and failed items.',
    samplePayload: event('run.completed', {
      id: 'run_2h6j8k0m3n5p7q9r1s4t6v8w', templateId: 'tpl_9a1s3d5f7g9h1j3k5l7z9x1c', siteId: 'site_8f3k2m9q4t7w1x5z6c0v2b8n',
      userId: 'auth0|5f1c2a9e', status: 'completed', score: 0.9, failedItemIds: ['itm_oil_leak'], completedAt: SAMPLE_TIME,
    }),
  },
];

const PARTNERS: Readonly<Record<string, Partner>> = {
  'workflow-automation': { actions: ACTIONS, triggers: TRIGGERS },
  webhooks: { actions: [], triggers: TRIGGERS },
};

export function isKnownPartner(partner: string): boolean {
  return Object.prototype.hasOwnProperty.call(PARTNERS, partner);
}

function toAction(entry: ActionEntry): IntegrationAction {
  const op = operations[entry.operationId];
  return { ...entry, method: op.method.toUpperCase() as IntegrationAction['method'], path: op.path, scopes: [...op.scopes] };
}

/** The partner's actions ordered by key, or undefined for an unknown partner. */
export function partnerActions(partner: string, page: PageRequest): Page<IntegrationAction> | undefined {
  return isKnownPartner(partner) ? pageByKey(PARTNERS[partner].actions, page, toAction) : undefined;
}

/** The partner's triggers ordered by key, or undefined for an unknown partner. */
export function partnerTriggers(partner: string, page: PageRequest): Page<IntegrationTrigger> | undefined {
  return isKnownPartner(partner) ? pageByKey(PARTNERS[partner].triggers, page, (t) => t) : undefined;
}

/**
 * Keyset paging over a catalogue in memory, with cursors shaped like the database lists'
 * (base64url JSON of the last sort key), so a client pages every list the same way.
 */
function pageByKey<E extends { key: string }, T>(entries: readonly E[], page: PageRequest, map: (e: E) => T): Page<T> {
  const sorted = [...entries].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const after = page.cursor === undefined ? undefined : (decodeCursor(page.cursor, ['text'])[0] as string);
  const rest = after === undefined ? sorted : sorted.filter((e) => e.key > after);
  const slice = rest.slice(0, page.limit);
  const hasMore = rest.length > page.limit;
  return {
    data: slice.map(map),
    nextCursor: hasMore ? encodeCursor([slice[slice.length - 1].key]) : null,
  };
}
