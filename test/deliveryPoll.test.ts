import type { Knex } from 'knex';
import { describeEachDatabase } from './support/testApp';
import { anyDeliveryDue, finishAttempt, subscriptionsInFlight } from '../runtime/storage/repositories/webhookDeliveriesRepository';
import { claimDueDeliveries, LAST_ATTEMPT_LOST } from '../runtime/webhooks/deliveryClaims';
import { inWriteTransaction } from '../runtime/storage/writeTransaction';
import { statementsSent, type SentStatement } from './support/sentStatements';

// The delivery engine polls for due deliveries several times a second in every process. A paused
// or disabled subscription keeps its undelivered deliveries (they go out on resume), and on a busy
// organization that backlog reaches millions of rows: the poll must find what is due through the
// active subscriptions and never read that backlog. Checked on the database's own plan for the
// statements the poll and the claim send, with a paused subscription holding thousands of due
// deliveries, and statistics as in production (gathered on Postgres, none on SQLite).

const HELD = 3000;

describeEachDatabase('the delivery poll', (t) => {
  const now = new Date().toISOString();
  const past = new Date(Date.now() - 3_600_000).toISOString();

  beforeAll(async () => {
    const k = t.db.knex;
    await k('organizations').insert({ id: 'org_poll', name: 'poll', created_at: past });
    const subscription = (id: string, status: string) => ({
      id, org_id: 'org_poll', partner: 'webhooks', trigger_key: 'log.created', match_key: 'log.created', target_url: `https://hooks.example.com/${id}`,
      status, secret: 'whsec_x', created_at: past, updated_at: past,
    });
    await k('webhook_subscriptions').insert([subscription('whs_paused', 'paused'), subscription('whs_active', 'active')]);
    const delivery = (i: number, subscriptionId: string, status: string, next: string | null) => ({
      id: `whd_poll_${i}`, org_id: 'org_poll', subscription_id: subscriptionId, event_id: `evt_poll_${i}`, event_type: 'log.created', status, attempts: 0,
      next_attempt_at: next, created_at: past, updated_at: past,
    });
    const rows = [];
    for (let i = 0; i < HELD; i++) rows.push(delivery(i, 'whs_paused', i % 2 ? 'pending' : 'failed', past));
    for (let i = HELD; i < HELD + 200; i++) rows.push(delivery(i, 'whs_active', i % 20 ? 'succeeded' : 'pending', i % 20 ? null : past));
    for (let i = 0; i < rows.length; i += 100) await k('webhook_deliveries').insert(rows.slice(i, i + 100));
    // Postgres' autovacuum gathers statistics on a live database; the server never runs SQLite's ANALYZE
    if (t.kind === 'postgres') for (const table of ['webhook_deliveries', 'webhook_subscriptions']) await k.raw('analyze ??', [table]);
  });

  /** The statements `run` sends, with their bindings. */
  async function statementsOf(run: () => Promise<unknown>): Promise<SentStatement[]> {
    return (await statementsSent(t.db.knex, run)).filter((s) => /webhook_deliveries/.test(s.sql) && /^\s*select/i.test(s.sql));
  }

  /** The names of the indexes the plan of `statement` reads webhook_deliveries through, and whether it scans the table. */
  async function plan(k: Knex, statement: { sql: string; bindings: unknown[] }): Promise<string> {
    if (t.kind === 'postgres') {
      const conn = await k.client.acquireConnection();
      try {
        const res = await conn.query(`explain ${statement.sql}`, statement.bindings);
        return res.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      } finally {
        await k.client.releaseConnection(conn);
      }
    }
    const rows = await k.raw(`explain query plan ${statement.sql}`, statement.bindings as Knex.RawBinding[]);
    return rows.map((r: { detail: string }) => r.detail).join('\n');
  }

  it('finds the due deliveries of active subscriptions through the due index, never the paused backlog', async () => {
    expect(await anyDeliveryDue(t.db.knex, now)).toBe(true);
    const polls = await statementsOf(() => anyDeliveryDue(t.db.knex, now));
    expect(polls).toHaveLength(1);
    const pollPlan = await plan(t.db.knex, polls[0]);
    // the due index only, entered per active subscription: no other index or scan of the deliveries
    expect(pollPlan).toContain('webhook_deliveries_due_index');
    expect(pollPlan.match(/webhook_deliveries_\w+/g)?.filter((name) => name !== 'webhook_deliveries_due_index')).toEqual([]);
    expect(pollPlan).not.toMatch(/Seq Scan on webhook_deliveries|SCAN d\b/);
    expect(pollPlan).toMatch(t.kind === 'postgres' ? /Index Cond: \(\(d\.subscription_id\)::text = \(s\.id\)::text\)|subscription_id\)::text = \(s\.id\)/ : /SEARCH d USING INDEX webhook_deliveries_due_index \(subscription_id=\? AND next_attempt_at<\?\)/);
  });

  it('counts the attempts under way per subscription through the index of live leases, never the whole table', async () => {
    // what every claim asks first (deliveryClaims.ts, MAX_IN_FLIGHT_PER_SUBSCRIPTION)
    const counting = await statementsOf(() => subscriptionsInFlight(t.db.knex, now, 1));
    expect(counting).toHaveLength(1);
    const countPlan = await plan(t.db.knex, counting[0]);
    expect(countPlan).toContain('webhook_deliveries_leased_index');
    expect(countPlan).not.toMatch(/Seq Scan on webhook_deliveries|SCAN webhook_deliveries/);
  });

  it('claims only the active subscription\'s due deliveries, going on past those whose event was purged', async () => {
    const k = t.db.knex;
    // one sendable delivery, due after the ten whose events do not exist (as when the retention purged them)
    const later = new Date(Date.parse(past) + 1000).toISOString();
    await k('events').insert({ id: 'evt_poll_live', org_id: 'org_poll', type: 'log.created', resource_id: 'log_live', data: '{"id":"log_live"}', changed_fields: null, occurred_at: later });
    await k('webhook_deliveries').insert({
      id: 'whd_poll_live', org_id: 'org_poll', subscription_id: 'whs_active', event_id: 'evt_poll_live', event_type: 'log.created', status: 'pending',
      attempts: 0, next_attempt_at: later, created_at: later, updated_at: later,
    });
    // four at a time: three rounds of given-up deliveries before the sendable one, in one claim
    const { claimed, givenUp } = await inWriteTransaction(k, (trx) => claimDueDeliveries(trx, now, 4, new Date(Date.now() + 60_000).toISOString(), 'token', 8));
    expect(claimed.map((c) => c.delivery.id)).toEqual(['whd_poll_live']);
    expect(givenUp).toEqual({ event_purged: 10, last_attempt_lost: 0 });
    const given = await k('webhook_deliveries').where({ status: 'abandoned' }).pluck('subscription_id');
    expect(given).toHaveLength(10);
    expect(new Set(given)).toEqual(new Set(['whs_active']));
    // the paused subscription's backlog is untouched, and nothing else is due
    expect(await k('webhook_deliveries').where({ subscription_id: 'whs_paused' }).whereNotNull('lease_token').count({ n: '*' })).toEqual([{ n: 0 }]);
    expect(await anyDeliveryDue(k, now)).toBe(false);
  });

  it('counts an attempt when it is claimed, and gives up one whose last attempt of the schedule got no outcome', async () => {
    const k = t.db.knex;
    const expired = new Date(Date.now() - 60_000).toISOString();
    // with a schedule of 8 attempts: the 8th was claimed and its lease ran out (its token still set);
    // the 7th likewise; one with 8 stored outcomes due again (the schedule was shortened since)
    const cases = { lost: { attempts: 8, lease_token: 'old' }, seventh: { attempts: 7, lease_token: 'old' }, shortened: { attempts: 8, lease_token: null } };
    for (const [name, state] of Object.entries(cases)) {
      await k('events').insert({ id: `evt_bound_${name}`, org_id: 'org_poll', type: 'log.created', resource_id: `log_${name}`, data: '{}', changed_fields: null, occurred_at: past });
      await k('webhook_deliveries').insert({
        id: `whd_bound_${name}`, org_id: 'org_poll', subscription_id: 'whs_active', event_id: `evt_bound_${name}`, event_type: 'log.created', status: 'failed',
        next_attempt_at: past, lease_until: state.lease_token && expired, created_at: past, updated_at: past, ...state,
      });
    }
    const { claimed, givenUp } = await inWriteTransaction(k, (trx) => claimDueDeliveries(trx, now, 4, new Date(Date.now() + 60_000).toISOString(), 'new', 8));
    expect(givenUp).toEqual({ event_purged: 0, last_attempt_lost: 1 });
    expect(claimed.map((c) => [c.delivery.id, c.delivery.attempts, c.delivery.lease_token]).sort()).toEqual([['whd_bound_seventh', 8, 'new'], ['whd_bound_shortened', 9, 'new']]);
    const stored = async (id: string) => k('webhook_deliveries').where({ id }).first('status', 'attempts', 'lease_token', 'next_attempt_at', 'last_response_excerpt');
    expect(await stored('whd_bound_seventh')).toMatchObject({ attempts: 8, lease_token: 'new' });
    expect(await stored('whd_bound_lost')).toEqual({ status: 'abandoned', attempts: 8, lease_token: 'old', next_attempt_at: null, last_response_excerpt: LAST_ATTEMPT_LOST });
    // the lost attempt's own outcome, should it still come, is stored over the give-up
    expect(await finishAttempt(k, 'whd_bound_lost', 'old', { status: 'succeeded', last_response_status: 200, last_response_excerpt: 'ok' })).toBe(true);
    expect(await stored('whd_bound_lost')).toEqual({ status: 'succeeded', attempts: 8, lease_token: null, next_attempt_at: null, last_response_excerpt: 'ok' });
    expect(await anyDeliveryDue(k, now)).toBe(false);
  });
});
