/**
 * The readiness check of GET /readyz, one for every process that answers it: the API server
 * (runtime/http/publicRoutes.ts) and the delivery engine run alone on WORKER_PORT
 * (runtime/webhooks/probeServer.ts). Ready: the database answers and has every migration this
 * code expects. The caller passes how to ask the database (`pendingMigrations` of
 * runtime/storage/migrate.ts), because this module, imported from every layer, imports no layer.
 */
import { ApiError, DATABASE_RETRY_AFTER_SECONDS } from '../errors';

export type Readiness = { ready: true } | { ready: false; reason: string };

/** The 503 of /readyz, the same from both listeners: SERVICE_UNAVAILABLE with `reason` and Retry-After. */
export function notReady(reason: string): ApiError {
  return new ApiError('SERVICE_UNAVAILABLE', reason, undefined, { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
}

export async function checkReadiness(pendingMigrations: () => Promise<string[]>): Promise<Readiness> {
  let pending: string[];
  try {
    pending = await pendingMigrations();
  } catch {
    return { ready: false, reason: 'The database is unreachable' };
  }
  if (pending.length) return { ready: false, reason: `The database lacks ${pending.length} migration(s): ${pending.join(', ')}` };
  return { ready: true };
}

/** What GET /readyz answers with 200 (the contract's readiness body). */
export const READY_BODY = { status: 'ok', database: 'ok', migrations: 'current' } as const;
