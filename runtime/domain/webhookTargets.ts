import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { ApiError } from '../errors';

/**
 * Where webhooks may go: `https` URLs whose host resolves only to public unicast addresses, so
 * that a subscription cannot make the server call into its own network (SSRF). Checked when
 * subscribing and again at every connection (`safeLookup`): a name that resolved to a public
 * address at subscribe time may point at 127.0.0.1 later (DNS rebinding).
 * WEBHOOK_ALLOW_PRIVATE_TARGETS=true lifts both checks (local development, tests).
 */

/**
 * ipaddr.js classifies every reserved, private, loopback, link-local, CGNAT, multicast and tunnel
 * range; only `unicast` is the public internet. It leaves some IPv6 ranges `unicast` that are
 * not: the deprecated IPv4-compatible addresses (`::a.b.c.d`, as in `::127.0.0.1`) and the rest
 * of the space IANA has not allocated. So an IPv6 address must also be in 2000::/3, the only
 * range assigned for global unicast (IPv4-mapped ones are checked as the IPv4 address they hold).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address);
  if (parsed.range() !== 'unicast') return false;
  return parsed.kind() === 'ipv4' || (parsed as ipaddr.IPv6).parts[0] >> 13 === 0b001;
}

export const targetNotAllowed = (message: string) =>
  new ApiError('TARGET_NOT_ALLOWED', message, [{ path: '/targetUrl', message }]);

/** Refuses (400 TARGET_NOT_ALLOWED) a target that is not https or does not resolve to public addresses only. */
export async function checkTarget(targetUrl: string, allowPrivate: boolean): Promise<void> {
  let url: URL;
  try {
    url = new URL(targetUrl);
  } catch {
    throw targetNotAllowed('is not an absolute URL');
  }
  // what the sender would call must be what was written: `https:///host` parses as
  // https://host/, so the same receiver could be subscribed twice under two spellings
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/\\?#]/i.test(targetUrl)) throw targetNotAllowed('must have its host right after the scheme, as in https://host/path');
  if (url.port === '0') throw targetNotAllowed('must not use port 0, which no receiver listens on');
  // a password in the URL would be shown back in every answer about the subscription; deliveries
  // are authenticated by their signature
  if (url.username || url.password) throw targetNotAllowed('must not contain credentials');
  if (allowPrivate) {
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw targetNotAllowed('must be an https or (with WEBHOOK_ALLOW_PRIVATE_TARGETS) http URL');
    return;
  }
  if (url.protocol !== 'https:') throw targetNotAllowed('must be an https URL');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) {
    if (!isPublicAddress(host)) throw targetNotAllowed(`points at ${host}, which is not a public address`);
    return;
  }
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw targetNotAllowed(`host ${host} does not resolve`);
    // the resolver failed for now (EAI_AGAIN, a timeout): not an answer about the host, so a 503 —
    // never stored under an Idempotency-Key, the same request may be sent again
    throw new ApiError('SERVICE_UNAVAILABLE', `The host ${host} could not be resolved right now (${code ?? 'lookup failed'}); retry later`, undefined, { 'Retry-After': '5' });
  }
  const blocked = addresses.find((a) => !isPublicAddress(a.address));
  if (blocked || addresses.length === 0) throw targetNotAllowed(`host ${host} resolves to ${blocked?.address ?? 'nothing'}, which is not a public address`);
}

export class TargetNotAllowedError extends Error {}

/**
 * A `lookup` for http(s).request that refuses to connect to a non-public address: the check
 * runs on the very addresses the socket connects to. An IP literal in the URL skips `lookup`
 * in Node, so the sender checks those itself (`checkLiteralHost`).
 */
export function safeLookup(allowPrivate: boolean): net.LookupFunction {
  return ((hostname: string, options: dns.LookupOptions, callback: (...args: any[]) => void) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses: dns.LookupAddress[]) => {
      if (err) return callback(err);
      const blocked = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a.address));
      if (blocked) return callback(new TargetNotAllowedError(`${hostname} resolves to ${blocked.address}, which is not a public address`));
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0].address, addresses[0].family);
    });
  }) as net.LookupFunction;
}

export function checkLiteralHost(url: URL, allowPrivate: boolean): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && net.isIP(host) && !isPublicAddress(host)) throw new TargetNotAllowedError(`${host} is not a public address`);
  if (!allowPrivate && url.protocol !== 'https:') throw new TargetNotAllowedError('the target is not https');
}
