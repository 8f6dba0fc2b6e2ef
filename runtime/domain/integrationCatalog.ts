import type { components } from '../../generated/types';
import { operations, OperationId } from '../../generated/operations';
import { decodeCursor, encodeCursor, type Page, type PageRequest } from '../cursor';
import contractDocument from '../../generated/openapi.json';
import { EVENT_TYPES, eventTypeInfo, isEventType, type EventType } from './eventTypes';

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

/**
 * One trigger per event type (the same list the API records, eventTypes.ts), each with the
 * example the contract's `webhooks` section gives for that type, so the catalogue's sample, the
 * documented payload and the delivered shape are one thing.
 */
const TRIGGERS: readonly IntegrationTrigger[] = EVENT_TYPES.map((type) => ({
  key: type,
  ...eventTypeInfo(type),
  samplePayload: webhookExample(type),
}));

function webhookExample(type: EventType): IntegrationTrigger['samplePayload'] {
  const webhooks = (contractDocument as { webhooks?: Record<string, any> }).webhooks ?? {};
  const example = webhooks[type]?.post?.requestBody?.content?.['application/json']?.example;
  if (!example) throw new Error(`the contract's webhooks section has no example for ${type}`);
  return example;
}

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

/** The catalogue's sample event of a trigger, or undefined for an unknown partner or key. */
export function triggerSample(partner: string, key: string): IntegrationTrigger['samplePayload'] | undefined {
  if (!isKnownPartner(partner) || !isEventType(key)) return undefined;
  return PARTNERS[partner].triggers.find((t) => t.key === key)?.samplePayload;
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
