import type { components } from '../../generated/types';
import { selectorsOf } from '../storage/repositories/webhookSubscriptionsRepository';

/**
 * Every event type the API records, with how the trigger catalogue describes it. The contract's
 * `EventType` enum is the source: this record is typed by it, so a type added there and not
 * here (or the reverse) does not compile, and the catalogue, the feed's `types` filter and the
 * `webhooks` section of the contract cannot drift apart (test/events.test.ts checks the last).
 */
export type EventType = components['schemas']['EventType'];

export interface EventTypeInfo {
  /** Kind of resource in the event's `data` (for `sensor_readings.ingested`, a batch summary). */
  resource: string;
  name: string;
  description: string;
}

const EVENT_TYPE_INFO: Readonly<Record<EventType, EventTypeInfo>> = {
  'site.created': { resource: 'site', name: 'Site created', description: 'A site was created.' },
  'site.updated': { resource: 'site', name: 'Site updated', description: 'A site was changed; `changedFields` names what changed.' },
  'site.deleted': { resource: 'site', name: 'Site deleted', description: 'A site was deleted; `data` is a tombstone `{id, deleted: true}`.' },
  'user.created': { resource: 'user', name: 'User profile created', description: 'A user profile was created.' },
  'user.updated': { resource: 'user', name: 'User profile updated', description: "A user profile was changed; `changedFields` names what changed. Also recorded when a check-in moves the profile's last location, after the check-in's event and in the same transaction; other events may come between the two, so pair them by `data.lastLocationCheckinId` (`changedFields` then names the last-location fields)." },
  'checkin.created': { resource: 'checkin', name: 'Check-in created', description: 'A check-in was planned, or a walk-in was recorded.' },
  'checkin.activated': { resource: 'checkin', name: 'Worker checked in', description: 'A check-in became active: the worker is on site.' },
  'checkin.checked_out': { resource: 'checkin', name: 'Worker checked out', description: 'A check-in was checked out: the worker left the site.' },
  'checkin.updated': { resource: 'checkin', name: 'Check-in updated', description: 'A check-in was changed without a status change (addresses, coordinates).' },
  'log.created': { resource: 'log', name: 'Log entry added', description: 'A comment, note or status entry was appended to an entity.' },
  'sensor_readings.ingested': {
    resource: 'sensor_readings', name: 'Sensor readings received',
    description: 'A batch of sensor readings was ingested: the counts and the newly stored readings (not the duplicates). One event per batch; a batch of only duplicates stored nothing and records none.',
  },
  'asset.created': { resource: 'asset', name: 'Asset registered', description: 'An asset was registered.' },
  'asset.updated': { resource: 'asset', name: 'Asset updated', description: 'An asset was changed; `changedFields` names what changed.' },
  'asset.deleted': { resource: 'asset', name: 'Asset deleted', description: 'An asset was deleted; `data` is a tombstone `{id, deleted: true}`.' },
  'issue.created': { resource: 'issue', name: 'Issue raised', description: 'An issue was raised.' },
  'issue.updated': { resource: 'issue', name: 'Issue updated', description: 'An issue was changed other than resolved or closed; `changedFields` names what changed.' },
  'issue.resolved': { resource: 'issue', name: 'Issue resolved', description: 'An issue was marked resolved.' },
  'issue.closed': { resource: 'issue', name: 'Issue closed', description: 'An issue was closed.' },
  'template.created': { resource: 'template', name: 'Template created', description: 'An inspection template was created.' },
  'template.updated': { resource: 'template', name: 'Template updated', description: 'An inspection template was changed (a new version); `changedFields` names what changed.' },
  'template.deleted': { resource: 'template', name: 'Template deleted', description: 'An inspection template was deleted; `data` is a tombstone `{id, deleted: true}`.' },
  'run.started': { resource: 'run', name: 'Inspection started', description: 'An inspection run was started.' },
  'run.updated': { resource: 'run', name: 'Inspection answered', description: 'Answers of an inspection run were recorded; `changedFields` names what changed.' },
  'run.completed': { resource: 'run', name: 'Inspection completed', description: 'An inspection run was completed, with its score and failed items.' },
  'schedule.created': { resource: 'schedule', name: 'Schedule created', description: 'An inspection schedule was created.' },
  'schedule.updated': { resource: 'schedule', name: 'Schedule updated', description: 'An inspection schedule was changed; `changedFields` names what changed.' },
  'schedule.deleted': { resource: 'schedule', name: 'Schedule deleted', description: 'An inspection schedule was deleted; `data` is a tombstone `{id, deleted: true}`.' },
};

/** Every event type, sorted. */
export const EVENT_TYPES: readonly EventType[] = (Object.keys(EVENT_TYPE_INFO) as EventType[]).sort();

export function isEventType(value: string): value is EventType {
  return Object.prototype.hasOwnProperty.call(EVENT_TYPE_INFO, value);
}

export function eventTypeInfo(type: EventType): EventTypeInfo {
  return EVENT_TYPE_INFO[type];
}

/** `*` or `<resource>.*`: several event types at once, for a webhook subscription (the contract's `EventTypePattern`). */
export type EventTypePattern = components['schemas']['EventTypePattern'];
/** What a subscription's `eventTypes` lists: types and patterns. */
export type EventTypeSelection = EventType | EventTypePattern;

/** Is `value` an event type or a pattern of known resources (`*`, `<resource>.*`): one of the selections some type's events match? */
export function isEventTypeSelection(value: string): value is EventTypeSelection {
  return EVENT_TYPES.some((type) => selects(value as EventTypeSelection, type));
}

/** Does `selection` (a type or a pattern) take events of `type`? The same three values recording looks subscriptions up by. */
export function selects(selection: EventTypeSelection, type: EventType): boolean {
  return selectorsOf(type).includes(selection);
}

/**
 * The selections a subscription keeps, sorted: a type or pattern another one of the list covers
 * adds nothing, so it is dropped (`*` stands alone). Two lists that take the same events with the
 * same patterns become the same list, which is what makes a subscription unique per target.
 */
export function normalizeSelections(selections: readonly EventTypeSelection[]): EventTypeSelection[] {
  const unique = [...new Set(selections)];
  const patterns = unique.filter((s) => s.endsWith('*'));
  const covered = (s: EventTypeSelection) => s !== '*' && patterns.some((p) => p !== s && (p === '*' || (!s.endsWith('*') && selects(p, s as EventType))));
  return unique.filter((s) => !covered(s)).sort();
}

/**
 * The event types `selections` take now, sorted (a replay's window is read by type). Recording
 * an event does not use it: it matches the type, its resource's pattern and `*` against the
 * selections as stored, so a pattern takes the types a later version adds from its first event.
 */
export function typesSelected(selections: readonly EventTypeSelection[]): EventType[] {
  return EVENT_TYPES.filter((type) => selections.some((s) => selects(s, type)));
}
