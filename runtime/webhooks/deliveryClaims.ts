import { Knex } from 'knex';
import { abandonDeliveries, ClaimedDelivery, dueDeliveries, leaseDeliveries } from '../storage/repositories/webhookDeliveriesRepository';

/** What a delivery given up because its event was purged shows as its last error. */
export const EVENT_PURGED = 'not sent: the event is older than the event retention and was purged';

/** What a delivery given up because its last attempt got no stored outcome shows as its last error. */
export const LAST_ATTEMPT_LOST = 'not sent again: the last attempt of its retry schedule got no stored outcome (the process sending it stopped, or stalled past its lease)';

/** Deliveries a claim gave up instead of claiming them, by reason (the metric's label). */
export interface GivenUp {
  event_purged: number;
  last_attempt_lost: number;
}

/** Rounds of one claim that may each find only deliveries to give up. */
const MAX_CLAIM_ROUNDS = 8;

/**
 * Claims up to `limit` due deliveries for `leaseUntil` under `token`, and counts the attempt
 * each is claimed for: an attempt is counted when it starts, so one whose process stopped before
 * storing its outcome (the receiver may have had it) still counts. Run it inside a write
 * transaction; concurrent workers claim disjoint sets (storage: dueDeliveries).
 *
 * Two kinds of due delivery are given up on the way (`abandoned`, with the reason) instead of
 * claimed, and the claim goes on past them rather than answering nothing:
 * - one whose event the retention purge removed (a replay of old events, mostly: a held delivery
 *   is purged with its event): it can never be sent;
 * - one whose last attempt of the schedule (`maxAttempts`) got no stored outcome: its lease ran
 *   out with its token still set (storing an outcome, and a retry, clear the token). Sent again
 *   it would be after every lease for ever if its sending process keeps stopping. Its token is
 *   kept, so that the outcome of that attempt, should it still come (a process stalled past its
 *   lease), is stored over the give-up.
 * The decision is taken on each delivery as it was before this claim.
 */
export async function claimDueDeliveries(
  trx: Knex, now: string, limit: number, leaseUntil: string, token: string, maxAttempts: number,
): Promise<{ claimed: ClaimedDelivery[]; givenUp: GivenUp }> {
  const givenUp: GivenUp = { event_purged: 0, last_attempt_lost: 0 };
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    const due = await dueDeliveries(trx, now, limit);
    const purged = due.filter((d) => d.event === null);
    const lastLost = due.filter((d) => d.event !== null && d.delivery.attempts >= maxAttempts && d.delivery.lease_token !== null);
    const sendable = due.filter((d): d is ClaimedDelivery => d.event !== null && !lastLost.includes(d));
    if (purged.length) await abandonDeliveries(trx, purged.map((d) => d.delivery.seq), EVENT_PURGED, now, { keepLease: false });
    if (lastLost.length) await abandonDeliveries(trx, lastLost.map((d) => d.delivery.seq), LAST_ATTEMPT_LOST, now, { keepLease: true });
    givenUp.event_purged += purged.length;
    givenUp.last_attempt_lost += lastLost.length;
    if (sendable.length) {
      await leaseDeliveries(trx, sendable.map((d) => d.delivery.seq), leaseUntil, token);
      const claimed = sendable.map((d) => ({ ...d, delivery: { ...d.delivery, attempts: d.delivery.attempts + 1, lease_until: leaseUntil, lease_token: token } }));
      return { claimed, givenUp };
    }
    if (!purged.length && !lastLost.length) break;
  }
  return { claimed: [], givenUp };
}
