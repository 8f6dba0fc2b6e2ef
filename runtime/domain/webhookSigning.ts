import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** A new signing secret in the form Standard Webhooks libraries take: `whsec_` and 24 random bytes in base64. */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/**
 * The Standard Webhooks headers of one attempt. `webhook-timestamp` is the time of the attempt
 * (receivers reject stale ones to stop replays), `webhook-id` the event id on every attempt.
 * Several secrets (during a rotation) give several space-separated signatures; a receiver
 * accepts the message when one matches.
 */
export function signatureHeaders(eventId: string, body: string, secrets: readonly string[], at = new Date()): Record<string, string> {
  return {
    'webhook-id': eventId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => new Webhook(secret).sign(eventId, at, body)).join(' '),
  };
}

/**
 * The secrets a message is signed with at `now`: the subscription's current one and, for
 * PREVIOUS_SECRET_HOURS after a rotation (webhookSubscriptions.ts), the one it replaced.
 */
export function signingSecrets(
  subscription: { secret: string; previous_secret: string | null; previous_secret_expires_at: string | null },
  now: Date,
): string[] {
  const secrets = [subscription.secret];
  if (subscription.previous_secret && subscription.previous_secret_expires_at && subscription.previous_secret_expires_at > now.toISOString()) {
    secrets.push(subscription.previous_secret);
  }
  return secrets;
}
