import type { Response } from 'express';
import type { OperationInfo } from '../../generated/operations';

/**
 * Deprecation signals (docs/architecture.md, "Statuses, errors and versions"): an operation marked `deprecated: true` with
 * `x-sunset` (and `x-deprecated-at`) in the contract answers with `Deprecation` and `Sunset`
 * as HTTP dates, and `Link: <guide>; rel="sunset"` when it names `x-migration-guide`. Set
 * before anything else runs, so error answers and replays carry them too.
 */
export type DeprecationInfo = Pick<OperationInfo, 'deprecated' | 'deprecatedAt' | 'sunset' | 'migrationGuide'>;

export function setDeprecationHeaders(res: Response, op: DeprecationInfo): void {
  if (!op.deprecated) return;
  if (op.deprecatedAt) res.set('Deprecation', httpDate(op.deprecatedAt, 'start'));
  if (op.sunset) res.set('Sunset', httpDate(op.sunset, 'end'));
  if (op.migrationGuide) res.set('Link', `<${op.migrationGuide}>; rel="sunset"`);
}

/**
 * A date (`2026-11-11`) or date-time from the contract as an HTTP date. A bare date means the
 * start of that day (UTC) for Deprecation and its last second for Sunset, as in the product's
 * `Sun, 11 Nov 2026 23:59:59 GMT`.
 */
export function httpDate(value: string, bareDateMeans: 'start' | 'end'): string {
  const time = bareDateMeans === 'start' ? '00:00:00' : '23:59:59';
  const date = /^\d{4}-\d{2}-\d{2}$/.test(value) ? new Date(`${value}T${time}Z`) : new Date(value);
  return date.toUTCString();
}
