import { randomBytes } from 'node:crypto';
import { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config';
import { toDeliveredEvent } from '../domain/events';
import { inWriteTransaction } from '../storage/writeTransaction';
import { toEvent } from '../storage/repositories/eventsRepository';
import { anyDeliveryDue, ClaimedDelivery, dueAgain, finishAttempt, firstAttemptEndOf, insertDeliveryAttempt, WebhookDeliveryRow } from '../storage/repositories/webhookDeliveriesRepository';
import { claimDueDeliveries } from './deliveryClaims';
import { disableSubscription, lockSubscription, markSubscriptionSucceeded } from '../storage/repositories/webhookSubscriptionsRepository';
import { accepted, AttemptOutcome, postWebhook } from '../domain/webhookSend';
import { signatureHeaders, signingSecrets } from '../domain/webhookSigning';
import { metrics } from '../observability/metrics';

/**
 * The delivery engine: claims due deliveries from the database with a lease, sends each signed
 * (Standard Webhooks), and stores the outcome. Every piece of queue state is in the database,
 * so any number of processes share the work (FOR UPDATE SKIP LOCKED on Postgres, the single
 * writer on SQLite), and a process that dies mid-attempt leaves its claims to the others once
 * the lease runs out: delivery is at least once, and receivers deduplicate on `webhook-id`.
 */

export type WorkerSettings = Pick<Config, 'webhookTimeoutSeconds' | 'webhookRetrySchedule' | 'webhookAllowPrivateTargets' | 'webhookLeaseSeconds'>;

export interface DeliveryWorkerOptions {
  db: Knex;
  settings: WorkerSettings;
  logger?: Logger;
  /** How often an idle worker looks for due deliveries. */
  pollIntervalMs?: number;
  /** Attempts in flight at once in this process. */
  concurrency?: number;
  /** While claiming keeps failing, at most one log line per this many ms. */
  failureLogIntervalMs?: number;
}

export interface DeliveryWorker {
  /** Claims nothing more, lets the attempts in flight finish and store their outcome, then resolves. */
  stop(): Promise<void>;
}

/** A 1 s p99 from commit to delivery leaves room for one idle poll and the attempt itself. */
const DEFAULT_POLL_MS = 200;
/**
 * Attempts in flight at once in one engine. One subscription alone may use half of them
 * (deliveryClaims.ts, MAX_IN_FLIGHT_ALONE: what keeps one busy receiver's deliveries within a
 * second of their commit on this machine, bench/README.md), so that the other half is always
 * there for the other subscriptions, however slow the busy one's receiver becomes.
 */
const DEFAULT_CONCURRENCY = 32;
/** Spread of retries around their scheduled delay, so that a receiver coming back is not hit by every retry at once. */
const JITTER = 0.2;
/** While the database refuses the claims (an outage), the engine asks this often, not every poll. */
const FAILING_POLL_MS = 1000;
/** …and logs the failure at most this often, with how many claims failed and since when. */
const FAILURE_LOG_MS = 60_000;
/** A Retry-After longer than this is capped: a receiver cannot park deliveries past the event retention. */
const MAX_RETRY_AFTER_SECONDS = 24 * 3600;

export function startDeliveryWorker(options: DeliveryWorkerOptions): DeliveryWorker {
  const { db, settings, logger } = options;
  const pollMs = options.pollIntervalMs ?? DEFAULT_POLL_MS;
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  let wake: (() => void) | undefined;
  const nap = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const failing = failureLog(logger, options.failureLogIntervalMs ?? FAILURE_LOG_MS);
  const loop = async () => {
    while (!stopping) {
      let claimed: ClaimedDelivery[] = [];
      const room = concurrency - inFlight.size;
      if (room > 0) {
        try {
          claimed = await claim(db, settings, room);
          failing.recovered();
        } catch (err) {
          failing.failed(err);
        }
      }
      for (const item of claimed) {
        const attempt: Promise<void> = deliver(db, settings, item, logger)
          .catch((err) => logger?.error({ err, deliveryId: item.delivery.id }, 'storing a webhook attempt failed'))
          .finally(() => {
            inFlight.delete(attempt);
            wake?.();
          });
        inFlight.add(attempt);
      }
      if (!claimed.length || inFlight.size >= concurrency) await nap(failing.since === undefined ? pollMs : Math.max(pollMs, FAILING_POLL_MS));
    }
    await Promise.all(inFlight);
  };
  const running = loop();
  return {
    async stop() {
      stopping = true;
      wake?.();
      await running;
    },
  };
}

/**
 * The claims' failures, told once when they start (with the error), then at most once per
 * `intervalMs` while they go on, and once when a claim works again: a database outage of an hour
 * is a few lines, not a stack trace every poll.
 */
function failureLog(logger: Logger | undefined, intervalMs: number) {
  let failures = 0;
  let loggedAt = 0;
  return {
    since: undefined as number | undefined,
    failed(err: unknown) {
      const now = Date.now();
      failures++;
      if (this.since === undefined) {
        this.since = loggedAt = now;
        logger?.warn({ err }, 'claiming webhook deliveries failed; retrying every second');
      } else if (now - loggedAt >= intervalMs) {
        loggedAt = now;
        logger?.warn({ failures, failingForMs: now - this.since, error: err instanceof Error ? err.message : String(err) }, 'claiming webhook deliveries still fails');
      }
    },
    recovered() {
      if (this.since === undefined) return;
      logger?.info({ failures, failedForMs: Date.now() - this.since }, 'claiming webhook deliveries works again');
      this.since = undefined;
      failures = 0;
    },
  };
}

async function claim(db: Knex, settings: WorkerSettings, limit: number): Promise<ClaimedDelivery[]> {
  const now = new Date();
  const nowIso = now.toISOString();
  // an idle worker only reads: on SQLite, polling must not take the write lock every time
  if (!(await anyDeliveryDue(db, nowIso))) return [];
  const token = randomBytes(12).toString('hex');
  const leaseUntil = new Date(now.getTime() + settings.webhookLeaseSeconds * 1000).toISOString();
  const { claimed, givenUp } = await inWriteTransaction(db, (trx) => claimDueDeliveries(trx, nowIso, limit, leaseUntil, token, settings.webhookRetrySchedule.length));
  for (const [reason, count] of Object.entries(givenUp)) if (count) metrics.webhookGivenUp.inc({ reason }, count);
  return claimed;
}

/** Sends one claimed delivery and stores its outcome (fenced on the lease). */
async function deliver(db: Knex, settings: WorkerSettings, item: ClaimedDelivery, logger?: Logger): Promise<void> {
  const { delivery, subscription } = item;
  const body = JSON.stringify(toDeliveredEvent(toEvent(item.event)));
  const now = new Date();
  const outcome = await postWebhook(subscription.target_url, signatureHeaders(item.event.id, body, signingSecrets(subscription, now), now), body, {
    timeoutMs: settings.webhookTimeoutSeconds * 1000,
    allowPrivate: settings.webhookAllowPrivateTargets,
  });
  const finishedAt = new Date().toISOString();
  // this attempt was counted when the delivery was claimed for it (claimDueDeliveries)
  const attempts = delivery.attempts;
  const common: Partial<WebhookDeliveryRow> = {
    last_response_status: outcome.status,
    last_response_excerpt: outcome.excerpt,
    last_attempt_at: finishedAt,
    updated_at: finishedAt,
  };
  const token = delivery.lease_token!;
  const ok = accepted(outcome);
  const storeOutcome = async (trx: Knex): Promise<'succeeded' | 'failed' | 'abandoned' | undefined> => {
    // the subscription's row first, then the delivery's: the order a change of the subscription
    // takes them in (webhookSubscriptions.ts, updateSubscription), so the two never deadlock
    const current = await lockSubscription(trx, subscription.id);
    if (!ok && current?.target_url !== subscription.target_url) {
      // the subscription moved to another target (or went) while this attempt was under way to the
      // old one: its failure is the old receiver's, so it neither counts against the new one nor
      // disables the subscription; the delivery goes to the new target now, on a new schedule
      // (as the move made the others: webhookSubscriptions.ts, updateSubscription)
      const kept = await finishAttempt(trx, delivery.id, token, { ...common, ...dueAgain(finishedAt) });
      return kept ? 'failed' : undefined;
    }
    if (ok) {
      if (await finishAttempt(trx, delivery.id, token, { ...common, status: 'succeeded', next_attempt_at: null })) {
        await markSubscriptionSucceeded(trx, subscription.id, finishedAt);
        return 'succeeded';
      }
      return undefined;
    }
    if (outcome.status === 410) {
      if (await finishAttempt(trx, delivery.id, token, { ...common, status: 'abandoned', next_attempt_at: null })) {
        await disableSubscription(trx, subscription.id, 'gone', finishedAt);
        logger?.info({ subscriptionId: subscription.id }, 'webhook target answered 410: subscription disabled');
        return 'abandoned';
      }
      return undefined;
    }
    const delay = nextDelaySeconds(settings.webhookRetrySchedule, attempts, outcome);
    if (delay !== undefined) {
      if (!(await finishAttempt(trx, delivery.id, token, { ...common, status: 'failed', next_attempt_at: new Date(Date.now() + delay * 1000).toISOString() }))) return undefined;
      if (current && (await failingForWholeSchedule(trx, settings, current, delivery, finishedAt))
        && (await disableSubscription(trx, subscription.id, 'failing', finishedAt))) {
        logger?.info({ subscriptionId: subscription.id, deliveryId: delivery.id }, 'webhook target failed for as long as the retry schedule lasts: subscription disabled');
      }
      return 'failed';
    }
    if (await finishAttempt(trx, delivery.id, token, { ...common, status: 'abandoned', next_attempt_at: null })) {
      // the whole schedule of this delivery passed without any delivery of the subscription succeeding
      const succeededSince = current?.last_success_at != null && current.last_success_at >= delivery.created_at;
      if (!succeededSince && (await disableSubscription(trx, subscription.id, 'failing', finishedAt))) {
        logger?.info({ subscriptionId: subscription.id }, 'webhook target failed a whole retry schedule: subscription disabled');
      }
      return 'abandoned';
    }
    return undefined;
  };
  const stored = await inWriteTransaction(db, async (trx) => {
    const result = await storeOutcome(trx);
    // the attempt's history, beside its outcome (an outcome dropped for a lost lease is not one)
    if (result) {
      await insertDeliveryAttempt(trx, {
        org_id: delivery.org_id, subscription_id: subscription.id, delivery_id: delivery.id, attempt: attempts, target_url: subscription.target_url,
        started_at: now.toISOString(), duration_ms: Date.parse(finishedAt) - now.getTime(), outcome: ok ? 'succeeded' : 'failed',
        response_status: outcome.status, response_excerpt: outcome.excerpt,
      });
    }
    return result;
  });
  // counted once the outcome is stored; an attempt whose lease was lost meanwhile is another worker's
  if (stored) metrics.webhookAttempts.inc({ outcome: stored });
  // one line per attempt that did not succeed (a success is the rule: debug), with what the
  // receiver answered, for an operator following a failing endpoint
  if (stored) {
    const line = { deliveryId: delivery.id, subscriptionId: subscription.id, eventId: item.event.id, attempt: attempts, status: outcome.status, outcome: stored, durationMs: Date.parse(finishedAt) - now.getTime() };
    if (stored === 'succeeded') logger?.debug(line, 'webhook attempt succeeded');
    else logger?.info({ ...line, excerpt: outcome.excerpt }, 'webhook attempt failed');
  }
}

/**
 * The time rule of `failing` (docs/webhooks.md, "Retries and disabling"), at a failed attempt that
 * is not its delivery's last: nothing the subscription sent has succeeded for as long as the
 * schedule lasts, counted from the end of the first attempt of the delivery's current schedule
 * (its first failure: time it waited unsent, an engine stopped, is not the endpoint failing; a
 * delivery sent again on request starts a new schedule) or, if later, from the subscription's last
 * change (a resume, a re-enabling, a new target or secret). It catches a delivery a queue kept
 * from its last attempt: an endpoint that hangs under a fast stream.
 */
async function failingForWholeSchedule(
  trx: Knex, settings: WorkerSettings, subscription: { last_success_at: string | null; updated_at: string },
  delivery: Pick<WebhookDeliveryRow, 'id' | 'created_at' | 'schedule_started_at' | 'attempts'>, finishedAt: string,
): Promise<boolean> {
  const lasts = scheduleSeconds(settings.webhookRetrySchedule) * 1000;
  const later = (a: string, b: string) => (a > b ? a : b);
  const lastedSince = (since: string) => Date.parse(finishedAt) - Date.parse(since) >= lasts;
  // the first attempt came after the schedule began: read it only when that could qualify
  if (!lastedSince(later(delivery.schedule_started_at ?? delivery.created_at, subscription.updated_at))) return false;
  // this attempt is the schedule's first (its row is written after), or an earlier one was (when
  // the first one's outcome was lost with its process, the first that has one)
  const firstEnd = delivery.attempts <= 1 ? finishedAt : ((await firstAttemptEndOf(trx, delivery)) ?? finishedAt);
  const since = later(firstEnd, subscription.updated_at);
  return lastedSince(since) && !(subscription.last_success_at !== null && subscription.last_success_at >= since);
}

/**
 * How long the retry schedule lasts, in seconds: the sum of its delays without their jitter (the
 * default's, about three days).
 */
export const scheduleSeconds = (schedule: readonly number[]): number => schedule.reduce((sum, delay) => sum + delay, 0);

/**
 * Seconds until the next attempt after `attempts` failed ones, or undefined when the schedule
 * is over. The scheduled delay gets ±20 % jitter; a Retry-After is a lower bound (capped).
 */
export function nextDelaySeconds(schedule: readonly number[], attempts: number, outcome: AttemptOutcome, random = Math.random): number | undefined {
  if (attempts >= schedule.length) return undefined;
  const scheduled = schedule[attempts] * (1 - JITTER + 2 * JITTER * random());
  const retryAfter = outcome.retryAfterSeconds === undefined ? 0 : Math.min(outcome.retryAfterSeconds, MAX_RETRY_AFTER_SECONDS);
  return Math.max(scheduled, retryAfter);
}
