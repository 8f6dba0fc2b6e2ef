import type { Knex } from 'knex';
import { describeEachDatabase, type TestContext } from './support/testApp';
import type { Page } from '../runtime/cursor';
import { listSites } from '../runtime/storage/repositories/sitesRepository';
import { listUsers } from '../runtime/storage/repositories/usersRepository';
import { listCheckins } from '../runtime/storage/repositories/checkinsRepository';
import { listLogs } from '../runtime/storage/repositories/logsRepository';
import { listSensorReadings } from '../runtime/storage/repositories/sensorReadingsRepository';
import { listAssets } from '../runtime/storage/repositories/assetsRepository';
import { listIssues } from '../runtime/storage/repositories/issuesRepository';
import { listTemplates } from '../runtime/storage/repositories/templatesRepository';
import { listRuns } from '../runtime/storage/repositories/runsRepository';
import { listSchedules } from '../runtime/storage/repositories/schedulesRepository';
import { listWebhookSubscriptions } from '../runtime/storage/repositories/webhookSubscriptionsRepository';
import { listDeliveries } from '../runtime/storage/repositories/webhookDeliveriesRepository';
import { decodeFeedCursor, listEvents } from '../runtime/storage/repositories/eventsRepository';
import { statementsSent, type SentStatement } from './support/sentStatements';
import { operations } from '../generated/operations';

// Every filter of every list, used alone (docs/architecture.md, "Lists and cursors"), must be
// served by an index that yields the organization's matching rows in the list's order, so that a
// page reads about `limit` rows and stops (migration 0012). Checked on the database's own plan
// (EXPLAIN QUERY PLAN on SQLite, EXPLAIN on Postgres) of the statements the repository functions
// send, caught as Knex runs them, for the first page and for the page after a cursor: every read
// of the table is an index search on the organization and the filter (and, after a cursor, on
// the sort key from the cursor on), with no sort step. Three pairs may sort, each for a reason
// given with it: `userId` of users (unique: one row), one sensor's readings (only those of the
// same instant) and the subscriptions listening to a trigger. Then each filtered walk is checked
// against the rows seeded: the right items, in order, each once.
//
// On Postgres sequential and bitmap scans are switched off for the EXPLAIN: at a few thousand
// rows the planner may rightly read a whole small table or a bitmap and sort it; without them
// it sorts only when no index can give the order, which is what this test asks. For the same
// reason the listed organization's rows are stored first and together: in a table this small
// the planner would otherwise read the primary key in order and skip the other organization's
// rows, as it does not when the organization is a small part of a large table.

const ORG = 'org_lists';
const OTHER = 'org_lists_other';
/** The other organization holds this many times the rows: the listed one is a small part of each table, as on a shared database. */
const OTHER_SCALE = 10;
const PLAN_LIMIT = 10;
const WALK_LIMIT = 25;

type Row = Record<string, unknown> & { id: string };

/** What the seed inserted per table, in insertion (so `seq`) order. */
const seeded: Record<string, Row[]> = {};

const T0 = Date.parse('2026-03-01T00:00:00.000Z');
const minute = (m: number) => new Date(T0 + m * 60_000).toISOString();
const pick = <T>(values: readonly T[], i: number): T => values[i % values.length];

function rowsFor(org: string, scale: number): Record<string, Row[]> {
  const n = 300 * scale;
  const now = minute(0);
  const id = (prefix: string, i: number) => `${prefix}_${org}_${String(i).padStart(6, '0')}`;
  const range = (count: number) => Array.from({ length: count }, (_, i) => i);
  const templates = range(30 * scale).map((i) => ({
    id: id('tpl', i), org_id: org, name: `Template ${i}`, version: 1, items: '[]', created_at: now, updated_at: now, deleted_at: i % 5 === 4 ? now : null,
  }));
  const readings: Row[] = [];
  // one reading per sensor, metric and minute; a sensor's readings of one instant are stored
  // temperature first, the other way round from the identity index (provider, metric). Sensors
  // are many (one is a 48th of the readings), as in a real organization: with few, walking the
  // time index and skipping the other sensors' readings would cost Postgres's planner about as
  // much as the identity index, and its choice would flip between runs
  for (let m = 0; m < 20 * scale; m++) {
    for (let s = 0; s < 48; s++) {
      for (const metric of ['temperature_c', 'humidity_pct']) {
        readings.push({
          id: id('srd', readings.length), org_id: org, provider: s < 32 ? 'acme-iot' : 'bolt-sense', sensor_external_id: `th-${String(s).padStart(4, '0')}`,
          sensor_name: null, site_id: `site-${s % 4}`, metric, value: m, unit: metric === 'temperature_c' ? 'C' : '%', occurred_at: minute(m), created_at: now,
        });
      }
    }
  }
  return {
    sites: range(n).map((i) => ({ id: id('site', i), org_id: org, name: `Site ${i}`, geofence_radius_meters: 100, created_at: now, updated_at: now })),
    users: range(n).map((i) => ({ id: id('usr', i), org_id: org, user_id: `user-${i}`, created_at: now, updated_at: now })),
    checkins: range(n).map((i) => ({
      id: id('chk', i), org_id: org, user_id: `user-${i % 7}`, site_id: `site-${i % 5}`, status: pick(['pre_checkin', 'active', 'checked_out'], i), created_at: now, updated_at: now,
    })),
    logs: range(n).map((i) => ({
      id: id('log', i), org_id: org, entity_type: pick(['checkin', 'site'], i), entity_id: `ent-${i % 4}`, entry_type: 'note', message: `m${i}`, source: 'api', created_at: now,
    })),
    sensor_readings: readings,
    assets: range(n).map((i) => ({
      id: id('ast', i), org_id: org, name: `Asset ${i}`, site_id: `site-${i % 5}`, asset_type: pick(['pump', 'valve', 'meter'], i), status: pick(['active', 'inactive', 'retired'], i >> 1),
      attributes: '{}', created_at: now, updated_at: now, deleted_at: i % 10 === 9 ? now : null,
    })),
    issues: range(n).map((i) => ({
      id: id('iss', i), org_id: org, title: `Issue ${i}`, status: pick(['open', 'in_progress', 'resolved', 'closed'], i), priority: pick(['low', 'medium', 'high', 'critical'], i >> 2),
      site_id: `site-${i % 5}`, asset_id: `asset-${i % 6}`, run_id: `run-${i % 7}`, assignee_user_id: `user-${i % 8}`, created_at: now, updated_at: now,
    })),
    templates,
    template_versions: templates.map((tpl) => ({ id: tpl.id, template_id: tpl.id, version: 1, org_id: org, items: '[]', created_at: now })),
    runs: range(n).map((i) => ({
      id: id('run', i), org_id: org, template_id: templates[i % 3].id, template_version: 1, site_id: `site-${i % 5}`, user_id: `user-${i % 7}`,
      status: pick(['in_progress', 'completed'], i >> 1), answers: '{}', started_at: now, created_at: now, updated_at: now,
    })),
    schedules: range(n).map((i) => ({
      id: id('sch', i), org_id: org, template_id: templates[i % 3].id, site_id: `site-${i % 5}`, assignee_user_id: `user-${i % 7}`, timezone: 'UTC',
      starts_at: '2026-03-02T08:00:00', duration_minutes: 30, created_at: now, updated_at: now,
    })),
    webhook_subscriptions: range(n).map((i) => ({
      id: id('whs', i), org_id: org, partner: pick(['webhooks', 'zapier'], i), trigger_key: null, match_key: `log.created,site.created,x${i}`,
      target_url: `https://hooks.example.com/${i}`, status: pick(['active', 'paused', 'disabled'], i >> 1), secret: 'whsec_x', created_at: now, updated_at: now,
    })),
    webhook_subscription_types: range(n).map((i) => ({ id: id('whs', i), subscription_id: id('whs', i), org_id: org, event_type: pick(['log.created', 'site.created', 'checkin.created'], i >> 1) })),
    webhook_deliveries: range(n).map((i) => ({
      id: id('whd', i), org_id: org, subscription_id: id('whs', Math.floor((3 * i) / n)), event_id: `evt-${i % 7}`, event_type: 'log.created', status: pick(['succeeded', 'succeeded', 'failed', 'pending', 'abandoned'], i),
      attempts: 0, created_at: now, updated_at: now,
    })),
    events: range(2 * n).map((i) => ({
      id: id('evt', i), org_id: org, type: pick(['log.created', 'checkin.created', 'checkin.activated', 'issue.updated', 'run.completed', 'site.deleted'], i),
      resource_id: `res-${i % 9}`, data: '{}', changed_fields: null, occurred_at: now,
    })),
  };
}

/** Columns that are not the table's own (bookkeeping of the seed). */
const NOT_COLUMNS: Record<string, readonly string[]> = { template_versions: ['id'], webhook_subscription_types: ['id'] };

async function seed(t: TestContext): Promise<void> {
  const k = t.db.knex;
  await k('organizations').insert([{ id: ORG, name: ORG, created_at: minute(0) }, { id: OTHER, name: OTHER, created_at: minute(0) }]);
  for (const [org, scale] of [[ORG, 1], [OTHER, OTHER_SCALE]] as const) {
    for (const [table, rows] of Object.entries(rowsFor(org, scale))) {
      if (org === ORG) seeded[table] = rows;
      const stored = rows.map((row) => Object.fromEntries(Object.entries(row).filter(([column]) => !NOT_COLUMNS[table]?.includes(column))));
      for (let i = 0; i < stored.length; i += 300) await k(table).insert(stored.slice(i, i + 300));
    }
  }
  // Postgres' autovacuum gathers statistics on a live database; the server never runs SQLite's ANALYZE
  if (t.kind === 'postgres') await k.raw('analyze');
}

/** One search a plan must make: on `table`, through an index, constrained on each of `columns`. */
interface Search {
  table: string;
  columns: readonly string[];
}

interface ListCase {
  /** The operation and its query parameter (`(organization)` for the list unfiltered). */
  list: string;
  filter: string;
  /** Every read of each of these tables must be an index search on these columns. */
  searches: readonly Search[];
  /** The sort key's first column, which the page after a cursor must search from. */
  from: string;
  read(db: Knex, limit: number, cursor?: string): Promise<Page<{ id: string }>>;
  /** The seeded rows the whole walk must return, in order. */
  expected(): Row[];
  /** Why this pair may sort, and on each database the sort it may have (none where not given). */
  sorts?: { why: string; sqlite?: RegExp; postgres?: RegExp };
  /** At most one row matches (a unique index): nothing to page through. */
  unique?: boolean;
}

const rowsOf = (table: string, where: (row: Row) => boolean = () => true) => () => seeded[table].filter(where);
const bySeq = (table: string, column: string, value: unknown): Pick<ListCase, 'searches' | 'from' | 'expected'> => ({
  searches: [{ table, columns: ['org_id', column] }],
  from: 'seq',
  expected: rowsOf(table, (row) => row[column] === value),
});
const page = (limit: number, cursor?: string) => ({ limit, cursor });
const live = (row: Row) => row.deleted_at === null;
/** Readings in list order: occurredAt, then storage order. */
const readingsWhere = (where: (row: Row) => boolean) => () => {
  const rows = seeded.sensor_readings.map((row, i) => ({ row, i })).filter(({ row }) => where(row));
  return rows.sort((a, b) => (a.row.occurred_at as string).localeCompare(b.row.occurred_at as string) || a.i - b.i).map(({ row }) => row);
};
const readings = (column: string, value: string): Pick<ListCase, 'searches' | 'from' | 'expected'> => ({
  searches: [{ table: 'sensor_readings', columns: ['org_id', column] }],
  from: 'occurred_at',
  expected: readingsWhere((row) => row[column] === value),
});
const feed = (filters: { types?: string[]; resourceId?: string }) => async (db: Knex, limit: number, cursor?: string) =>
  listEvents(db, ORG, filters, limit, cursor === undefined ? undefined : decodeFeedCursor(cursor));
const whs = (i: number) => `whs_${ORG}_${String(i).padStart(6, '0')}`;
const tpl = (i: number) => `tpl_${ORG}_${String(i).padStart(6, '0')}`;

const CASES: ListCase[] = [
  { list: 'listSites', filter: '(organization)', searches: [{ table: 'sites', columns: ['org_id'] }], from: 'seq', expected: rowsOf('sites'), read: (db, l, c) => listSites(db, ORG, page(l, c)) },
  { list: 'listUsers', filter: '(organization)', searches: [{ table: 'users', columns: ['org_id'] }], from: 'seq', expected: rowsOf('users'), read: (db, l, c) => listUsers(db, ORG, {}, page(l, c)) },
  // (org_id, user_id) is unique: one row at most, which Postgres may "sort"
  { list: 'listUsers', filter: 'userId', ...bySeq('users', 'user_id', 'user-7'), unique: true, read: (db, l, c) => listUsers(db, ORG, { userId: 'user-7' }, page(l, c)) },
  { list: 'listCheckins', filter: '(organization)', searches: [{ table: 'checkins', columns: ['org_id'] }], from: 'seq', expected: rowsOf('checkins'), read: (db, l, c) => listCheckins(db, ORG, {}, page(l, c)) },
  { list: 'listCheckins', filter: 'userId', ...bySeq('checkins', 'user_id', 'user-3'), read: (db, l, c) => listCheckins(db, ORG, { userId: 'user-3' }, page(l, c)) },
  { list: 'listCheckins', filter: 'siteId', ...bySeq('checkins', 'site_id', 'site-2'), read: (db, l, c) => listCheckins(db, ORG, { siteId: 'site-2' }, page(l, c)) },
  { list: 'listCheckins', filter: 'status', ...bySeq('checkins', 'status', 'active'), read: (db, l, c) => listCheckins(db, ORG, { status: 'active' }, page(l, c)) },
  {
    list: 'listLogs', filter: 'entityType + entityId (required)', searches: [{ table: 'logs', columns: ['org_id', 'entity_type', 'entity_id'] }], from: 'seq',
    expected: rowsOf('logs', (row) => row.entity_type === 'site' && row.entity_id === 'ent-3'),
    read: (db, l, c) => listLogs(db, ORG, { entityType: 'site', entityId: 'ent-3' }, page(l, c)),
  },
  {
    list: 'listSensorReadings', filter: '(organization)', searches: [{ table: 'sensor_readings', columns: ['org_id'] }], from: 'occurred_at',
    expected: readingsWhere(() => true), read: (db, l, c) => listSensorReadings(db, ORG, {}, page(l, c)),
  },
  { list: 'listSensorReadings', filter: 'siteId', ...readings('site_id', 'site-1'), read: (db, l, c) => listSensorReadings(db, ORG, { siteId: 'site-1' }, page(l, c)) },
  { list: 'listSensorReadings', filter: 'provider', ...readings('provider', 'bolt-sense'), read: (db, l, c) => listSensorReadings(db, ORG, { provider: 'bolt-sense' }, page(l, c)) },
  {
    list: 'listSensorReadings', filter: 'sensorExternalId', ...readings('sensor_external_id', 'th-0005'),
    read: (db, l, c) => listSensorReadings(db, ORG, { sensorExternalId: 'th-0005' }, page(l, c)),
    // migration 0012: the identity index gives one sensor's readings by time; only its readings
    // of one instant (its metrics) are put in `seq` order — an index of its own would slow
    // every ingested batch far more than the others (the migration says by how much)
    sorts: {
      why: "one sensor's readings of the same instant",
      sqlite: /USE TEMP B-TREE FOR (LAST TERM|RIGHT PART) OF ORDER BY/,
      postgres: /Incremental Sort[\s\S]*Presorted Key: occurred_at\b/,
    },
  },
  { list: 'listSensorReadings', filter: 'metric', ...readings('metric', 'humidity_pct'), read: (db, l, c) => listSensorReadings(db, ORG, { metric: 'humidity_pct' }, page(l, c)) },
  {
    list: 'listSensorReadings', filter: 'occurredAfter', searches: [{ table: 'sensor_readings', columns: ['org_id', 'occurred_at'] }], from: 'occurred_at',
    expected: readingsWhere((row) => (row.occurred_at as string) > minute(5)), read: (db, l, c) => listSensorReadings(db, ORG, { occurredAfter: minute(5) }, page(l, c)),
  },
  {
    list: 'listSensorReadings', filter: 'occurredBefore', searches: [{ table: 'sensor_readings', columns: ['org_id', 'occurred_at'] }], from: 'occurred_at',
    expected: readingsWhere((row) => (row.occurred_at as string) < minute(15)), read: (db, l, c) => listSensorReadings(db, ORG, { occurredBefore: minute(15) }, page(l, c)),
  },
  { list: 'listAssets', filter: '(organization)', searches: [{ table: 'assets', columns: ['org_id'] }], from: 'seq', expected: rowsOf('assets', live), read: (db, l, c) => listAssets(db, ORG, {}, page(l, c)) },
  { list: 'listAssets', filter: 'siteId', ...bySeq('assets', 'site_id', 'site-4'), expected: rowsOf('assets', (row) => live(row) && row.site_id === 'site-4'), read: (db, l, c) => listAssets(db, ORG, { siteId: 'site-4' }, page(l, c)) },
  { list: 'listAssets', filter: 'assetType', ...bySeq('assets', 'asset_type', 'valve'), expected: rowsOf('assets', (row) => live(row) && row.asset_type === 'valve'), read: (db, l, c) => listAssets(db, ORG, { assetType: 'valve' }, page(l, c)) },
  { list: 'listAssets', filter: 'status', ...bySeq('assets', 'status', 'retired'), expected: rowsOf('assets', (row) => live(row) && row.status === 'retired'), read: (db, l, c) => listAssets(db, ORG, { status: 'retired' }, page(l, c)) },
  { list: 'listIssues', filter: '(organization)', searches: [{ table: 'issues', columns: ['org_id'] }], from: 'seq', expected: rowsOf('issues'), read: (db, l, c) => listIssues(db, ORG, {}, page(l, c)) },
  { list: 'listIssues', filter: 'status', ...bySeq('issues', 'status', 'resolved'), read: (db, l, c) => listIssues(db, ORG, { status: 'resolved' }, page(l, c)) },
  { list: 'listIssues', filter: 'priority', ...bySeq('issues', 'priority', 'high'), read: (db, l, c) => listIssues(db, ORG, { priority: 'high' }, page(l, c)) },
  { list: 'listIssues', filter: 'siteId', ...bySeq('issues', 'site_id', 'site-3'), read: (db, l, c) => listIssues(db, ORG, { siteId: 'site-3' }, page(l, c)) },
  { list: 'listIssues', filter: 'assetId', ...bySeq('issues', 'asset_id', 'asset-5'), read: (db, l, c) => listIssues(db, ORG, { assetId: 'asset-5' }, page(l, c)) },
  { list: 'listIssues', filter: 'runId', ...bySeq('issues', 'run_id', 'run-6'), read: (db, l, c) => listIssues(db, ORG, { runId: 'run-6' }, page(l, c)) },
  { list: 'listIssues', filter: 'assigneeUserId', ...bySeq('issues', 'assignee_user_id', 'user-1'), read: (db, l, c) => listIssues(db, ORG, { assigneeUserId: 'user-1' }, page(l, c)) },
  { list: 'listTemplates', filter: '(organization)', searches: [{ table: 'templates', columns: ['org_id'] }], from: 'seq', expected: rowsOf('templates', live), read: (db, l, c) => listTemplates(db, ORG, page(l, c)) },
  { list: 'listRuns', filter: '(organization)', searches: [{ table: 'runs', columns: ['org_id'] }], from: 'seq', expected: rowsOf('runs'), read: (db, l, c) => listRuns(db, ORG, {}, page(l, c)) },
  { list: 'listRuns', filter: 'status', ...bySeq('runs', 'status', 'completed'), read: (db, l, c) => listRuns(db, ORG, { status: 'completed' }, page(l, c)) },
  { list: 'listRuns', filter: 'siteId', ...bySeq('runs', 'site_id', 'site-0'), read: (db, l, c) => listRuns(db, ORG, { siteId: 'site-0' }, page(l, c)) },
  { list: 'listRuns', filter: 'templateId', ...bySeq('runs', 'template_id', tpl(1)), read: (db, l, c) => listRuns(db, ORG, { templateId: tpl(1) }, page(l, c)) },
  { list: 'listRuns', filter: 'userId', ...bySeq('runs', 'user_id', 'user-4'), read: (db, l, c) => listRuns(db, ORG, { userId: 'user-4' }, page(l, c)) },
  { list: 'listSchedules', filter: '(organization)', searches: [{ table: 'schedules', columns: ['org_id'] }], from: 'seq', expected: rowsOf('schedules'), read: (db, l, c) => listSchedules(db, ORG, {}, page(l, c)) },
  { list: 'listSchedules', filter: 'siteId', ...bySeq('schedules', 'site_id', 'site-1'), read: (db, l, c) => listSchedules(db, ORG, { siteId: 'site-1' }, page(l, c)) },
  { list: 'listSchedules', filter: 'assigneeUserId', ...bySeq('schedules', 'assignee_user_id', 'user-2'), read: (db, l, c) => listSchedules(db, ORG, { assigneeUserId: 'user-2' }, page(l, c)) },
  { list: 'listSchedules', filter: 'templateId', ...bySeq('schedules', 'template_id', tpl(2)), read: (db, l, c) => listSchedules(db, ORG, { templateId: tpl(2) }, page(l, c)) },
  {
    list: 'listIntegrationSubscriptions', filter: '(organization, partner)', searches: [{ table: 'webhook_subscriptions', columns: ['org_id', 'partner'] }], from: 'seq',
    expected: rowsOf('webhook_subscriptions', (row) => row.partner === 'webhooks'), read: (db, l, c) => listWebhookSubscriptions(db, ORG, 'webhooks', {}, page(l, c)),
  },
  {
    list: 'listIntegrationSubscriptions', filter: 'status', searches: [{ table: 'webhook_subscriptions', columns: ['org_id', 'partner', 'status'] }], from: 'seq',
    expected: rowsOf('webhook_subscriptions', (row) => row.partner === 'webhooks' && row.status === 'paused'),
    read: (db, l, c) => listWebhookSubscriptions(db, ORG, 'webhooks', { status: 'paused' }, page(l, c)),
  },
  {
    list: 'listIntegrationSubscriptions', filter: 'triggerKey',
    searches: [{ table: 'webhook_subscriptions', columns: ['org_id', 'partner'] }, { table: 'webhook_subscription_types', columns: ['org_id', 'event_type'] }], from: 'seq',
    expected: () => {
      const listening = new Set(seeded.webhook_subscription_types.filter((row) => row.event_type === 'site.created').map((row) => row.subscription_id));
      return seeded.webhook_subscriptions.filter((row) => row.partner === 'webhooks' && listening.has(row.id));
    },
    read: (db, l, c) => listWebhookSubscriptions(db, ORG, 'webhooks', { triggerKey: 'site.created' }, page(l, c)),
    // the types of a subscription are rows of their own, which do not carry its seq: the
    // partner's subscriptions that listen are found through (org_id, event_type) and may be
    // sorted — an organization's subscriptions are its configuration, not a growing log
    sorts: { why: 'the subscriptions listening to one event type', postgres: /Sort\s+\([^\n]*\n\s*Sort Key: webhook_subscriptions\.seq$/ },
  },
  {
    list: 'listIntegrationSubscriptionDeliveries', filter: '(subscription)', searches: [{ table: 'webhook_deliveries', columns: ['subscription_id'] }], from: 'seq',
    expected: rowsOf('webhook_deliveries', (row) => row.subscription_id === whs(1)), read: (db, l, c) => listDeliveries(db, ORG, whs(1), {}, page(l, c)),
  },
  {
    list: 'listIntegrationSubscriptionDeliveries', filter: 'status', searches: [{ table: 'webhook_deliveries', columns: ['subscription_id', 'status'] }], from: 'seq',
    expected: rowsOf('webhook_deliveries', (row) => row.subscription_id === whs(1) && row.status === 'failed'),
    read: (db, l, c) => listDeliveries(db, ORG, whs(1), { status: 'failed' }, page(l, c)),
  },
  {
    // one event's deliveries: the first and those of replays (seeded: each event several times)
    list: 'listIntegrationSubscriptionDeliveries', filter: 'eventId', searches: [{ table: 'webhook_deliveries', columns: ['subscription_id', 'event_id'] }], from: 'seq',
    expected: rowsOf('webhook_deliveries', (row) => row.subscription_id === whs(1) && row.event_id === 'evt-3'),
    read: (db, l, c) => listDeliveries(db, ORG, whs(1), { eventId: 'evt-3' }, page(l, c)),
  },
  { list: 'listEvents', filter: '(organization)', searches: [{ table: 'events', columns: ['org_id'] }], from: 'seq', expected: rowsOf('events'), read: feed({}) },
  { list: 'listEvents', filter: 'types (one)', ...bySeq('events', 'type', 'issue.updated'), read: feed({ types: ['issue.updated'] }) },
  {
    list: 'listEvents', filter: 'types (several)', searches: [{ table: 'events', columns: ['org_id', 'type'] }], from: 'seq',
    expected: rowsOf('events', (row) => ['site.deleted', 'checkin.activated', 'run.completed'].includes(row.type as string)),
    read: feed({ types: ['site.deleted', 'checkin.activated', 'run.completed', 'site.deleted'] }),
  },
  { list: 'listEvents', filter: 'resourceId', ...bySeq('events', 'resource_id', 'res-4'), read: feed({ resourceId: 'res-4' }) },
];

/** Lists of rows not stored as such: the catalogue's (in code) and the calendar's (expanded from schedules). */
const NOT_STORED = ['listIntegrationActions', 'listIntegrationTriggers', 'listCalendarOccurrences'];
/** Query parameters that page or place a walk, not filters. */
const NOT_FILTERS = ['limit', 'cursor', 'after', 'afterEvent', 'since'];

it('every filter of every stored list in the contract has its case here', () => {
  // a filter added to the contract without its case (and its index) fails here, not later on a large table
  const lists = Object.values(operations).filter((op) => op.operationId.startsWith('list') && !NOT_STORED.includes(op.operationId));
  const uncovered = lists.flatMap((op) => op.queryParams
    .filter((param) => !NOT_FILTERS.includes(param))
    .filter((param) => !CASES.some((c) => c.list === op.operationId && c.filter.split(/[^A-Za-z]+/).includes(param)))
    .map((param) => `${op.operationId} ${param}`));
  expect(lists.length).toBeGreaterThan(10);
  expect(uncovered).toEqual([]);
});

describeEachDatabase('each list filter is served by an index in list order', (t) => {
  beforeAll(async () => seed(t), 60_000);

  /** The SELECTs `run` sends, with their bindings. */
  async function statementsOf(run: () => Promise<unknown>): Promise<SentStatement[]> {
    return (await statementsSent(t.db.knex, run)).filter((s) => /^\s*\(?\s*select/i.test(s.sql));
  }

  async function plan(statement: { sql: string; bindings: unknown[] }): Promise<string> {
    const k = t.db.knex;
    if (t.kind === 'postgres') {
      const conn = await k.client.acquireConnection();
      try {
        await conn.query('set enable_seqscan = off');
        await conn.query('set enable_bitmapscan = off');
        const res = await conn.query(`explain ${statement.sql}`, statement.bindings);
        return res.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      } finally {
        await conn.query('reset enable_seqscan');
        await conn.query('reset enable_bitmapscan');
        await k.client.releaseConnection(conn);
      }
    }
    const rows = await k.raw(`explain query plan ${statement.sql}`, statement.bindings as Knex.RawBinding[]);
    return rows.map((r: { detail: string }) => r.detail).join('\n');
  }

  /** Each read of `table` in the plan, with the conditions its index search is made on (none for a scan). */
  function readsOf(text: string, table: string): { line: string; conditions: string | null }[] {
    if (t.kind === 'sqlite') {
      return text.split('\n').filter((line) => new RegExp(`^(SEARCH|SCAN) ${table}\\b`).test(line)).map((line) => ({
        line,
        conditions: /^SEARCH .* USING (COVERING )?INDEX \S+ \((.*)\)$/.exec(line)?.[2] ?? null,
      }));
    }
    const lines = text.split('\n');
    const reads = [];
    for (let i = 0; i < lines.length; i++) {
      const node = /(?:->\s+|^)([A-Z][A-Za-z ]*?Scan)(?: using \S+)? on (\w+)/.exec(lines[i]);
      if (!node || node[2] !== table) continue;
      let conditions: string | null = null;
      for (let j = i + 1; j < lines.length && !/->/.test(lines[j]); j++) {
        const cond = /Index Cond: (.*)$/.exec(lines[j]);
        if (cond) conditions = cond[1];
      }
      reads.push({ line: lines[i], conditions: /^Index (Only )?Scan$/.test(node[1]) ? conditions : null });
    }
    return reads;
  }

  /** Whether `conditions` constrain `column` (equality or range) in the plan's notation. */
  function constrains(conditions: string, column: string): boolean {
    return t.kind === 'sqlite'
      ? new RegExp(`(^|AND )(${column === 'seq' ? 'seq|rowid' : column})[=<>]`).test(conditions) // `seq` is the rowid every SQLite index ends in
      : new RegExp(`\\(${column}\\)(::text)? [=<>]|\\b${column} [=<>]`).test(conditions);
  }

  /** Each sort step of the plan: its line (SQLite), or its node with the lines of detail under it (Postgres). */
  function sortSteps(text: string): string[] {
    const lines = text.split('\n');
    if (t.kind === 'sqlite') return lines.filter((line) => /USE TEMP B-TREE/.test(line));
    const steps: string[] = [];
    for (let i = 0; i < lines.length; i++) {
      if (!/(^|->\s+)(Incremental )?Sort\s+\(/.test(lines[i])) continue;
      let end = i + 1;
      while (end < lines.length && !/->/.test(lines[end])) end++;
      steps.push(lines.slice(i, end).join('\n'));
    }
    return steps;
  }

  async function checkPlan(c: ListCase, run: () => Promise<unknown>, afterCursor: boolean) {
    const statements = await statementsOf(run);
    expect(statements.length).toBeGreaterThan(0);
    for (const statement of statements) {
      const text = await plan(statement);
      const where = `${c.list} ${c.filter}${afterCursor ? ', after a cursor' : ''}:\n${statement.sql}\n${text}`;
      for (const search of c.searches) {
        const reads = readsOf(text, search.table);
        if (!reads.length) throw new Error(`no read of ${search.table} in the plan of ${where}`);
        for (const read of reads) {
          const columns = [...search.columns, ...(afterCursor && !c.unique && search === c.searches[0] ? [c.from] : [])];
          const missing = read.conditions === null ? columns : columns.filter((column) => !constrains(read.conditions!, column));
          if (missing.length) throw new Error(`${read.line.trim()} does not search the index on ${missing.join(', ')} in the plan of ${where}`);
        }
      }
      if (c.unique) continue; // one row at most: nothing to sort
      // each sort step must be the one allowed for this pair, if any: an allowed one does not excuse another
      const allowed = c.sorts?.[t.kind];
      for (const step of sortSteps(text)) {
        if (!allowed?.test(step)) throw new Error(`a sort step${allowed ? ` other than of ${c.sorts!.why}` : ''} (${step.trim()}) in the plan of ${where}`);
      }
    }
  }

  describe.each(CASES.map((c) => [`${c.list} by ${c.filter}`, c] as const))('%s', (_name, c) => {
    it('reads through an index in list order, from the first page and from a cursor', async () => {
      await checkPlan(c, () => c.read(t.db.knex, PLAN_LIMIT), false);
      const first = await c.read(t.db.knex, PLAN_LIMIT);
      if (c.unique) return expect(first.nextCursor).toBeNull();
      expect(first.nextCursor).not.toBeNull();
      await checkPlan(c, () => c.read(t.db.knex, PLAN_LIMIT, first.nextCursor!), true);
    });

    it('walks the organization\'s matching items in order, each once', async () => {
      const ids: string[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 1000; pages++) {
        const result = await c.read(t.db.knex, WALK_LIMIT, cursor);
        ids.push(...result.data.map((item) => item.id));
        if (result.nextCursor === null) break;
        cursor = result.nextCursor;
      }
      const expected = c.expected().map((row) => row.id);
      expect(expected.length).toBeGreaterThan(c.unique ? 0 : PLAN_LIMIT);
      expect(ids).toEqual(expected);
    });
  });
});
