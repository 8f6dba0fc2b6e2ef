/**
 * The readiness check of GET /readyz, one for every process that answers it: the API server
 * (runtime/http/publicRoutes.ts) and the delivery engine run alone on WORKER_PORT
 * (runtime/webhooks/probeServer.ts). Ready: the database answers and has every migration this
 * code expects. The caller passes how to ask the database (`pendingMigrations` of
 * runtime/storage/migrate.ts), because this module, imported from every layer, imports none.
 */
export type Readiness = { ready: true } | { ready: false; reason: string };

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
