import { Knex } from 'knex';
import { abandonDeliveries, anyDeliveryDue, ClaimedDelivery, dueDeliveries, leaseDeliveries, subscriptionsInFlight } from '../storage/repositories/webhookDeliveriesRepository';

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
 * How many attempts of one subscription may be under way at once, counted from the leases in the
 * database, so across every engine (engines claiming at the very same moment may each take up to
 * it): MAX_IN_FLIGHT_PER_SUBSCRIPTION while other subscriptions have deliveries due or under way,
 * MAX_IN_FLIGHT_ALONE for the only one that has. So a receiver that hangs until the timeout holds
 * at most half of an engine's 32 attempts (deliveryWorker.ts), and no more once another
 * subscription has something to send: the others' deliveries go out at once instead of queueing
 * behind its backlog. A busy subscription alone still gets 16 attempts at once, what it needs to
 * keep up with a busy organization's writes (bench/README.md, the delivery scenario).
 */
export const MAX_IN_FLIGHT_PER_SUBSCRIPTION = 4;
export const MAX_IN_FLIGHT_ALONE = 16;

/** Stands in `seen` for subscriptions known to have deliveries due, not yet read. */
const OTHERS_DUE = '(others)';

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
  const claimed: ClaimedDelivery[] = [];
  // attempts under way per subscription, those claimed here included, and the subscriptions seen
  // with deliveries due or under way (MAX_IN_FLIGHT_PER_SUBSCRIPTION)
  const underWay = await subscriptionsInFlight(trx, now, 1);
  const seen = new Set<string>(underWay.keys());
  const cap = () => (seen.size > 1 ? MAX_IN_FLIGHT_PER_SUBSCRIPTION : MAX_IN_FLIGHT_ALONE);
  let othersAsked = false;
  for (let round = 0; round < MAX_CLAIM_ROUNDS && claimed.length < limit; round++) {
    const room = limit - claimed.length;
    const due = await dueDeliveries(trx, now, room, [...underWay].filter(([, n]) => n >= cap()).map(([id]) => id));
    for (const d of due) seen.add(d.delivery.subscription_id);
    // the oldest due deliveries all one subscription's: before it may have more than its share,
    // whether another subscription has something due behind them
    if (seen.size === 1 && due.length === room && !othersAsked) {
      othersAsked = true;
      if (await anyDeliveryDue(trx, now, [...seen])) seen.add(OTHERS_DUE);
    }
    const purged = due.filter((d) => d.event === null);
    const lastLost = due.filter((d) => d.event !== null && d.delivery.attempts >= maxAttempts && d.delivery.lease_token !== null);
    const sendable = due.filter((d): d is ClaimedDelivery => d.event !== null && !lastLost.includes(d));
    if (purged.length) await abandonDeliveries(trx, purged.map((d) => d.delivery.seq), EVENT_PURGED, now, { keepLease: false });
    if (lastLost.length) await abandonDeliveries(trx, lastLost.map((d) => d.delivery.seq), LAST_ATTEMPT_LOST, now, { keepLease: true });
    givenUp.event_purged += purged.length;
    givenUp.last_attempt_lost += lastLost.length;
    // each subscription up to its room; what is left stays due
    let crowded = false;
    const fits = sendable.filter((d) => {
      const n = underWay.get(d.delivery.subscription_id) ?? 0;
      if (n >= cap()) {
        crowded = true;
        return false;
      }
      underWay.set(d.delivery.subscription_id, n + 1);
      return true;
    });
    if (fits.length) {
      await leaseDeliveries(trx, fits.map((d) => d.delivery.seq), leaseUntil, token);
      claimed.push(...fits.map((d) => ({ ...d, delivery: { ...d.delivery, attempts: d.delivery.attempts + 1, lease_until: leaseUntil, lease_token: token } })));
    }
    // more may be due behind those given up, or, when others wait, behind the subscriptions now full
    if (purged.length || lastLost.length || (crowded && seen.size > 1)) continue;
    break;
  }
  return { claimed, givenUp };
}
