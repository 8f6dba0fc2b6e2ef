import type { Logger } from 'pino';

/**
 * Runs each job every `everyMs` off the request path (0: never) and returns the stop function.
 * A failed run is logged and the next tick tries again. Used for the purges of expired
 * idempotency keys and events: several processes may all run them, the deletes are idempotent.
 */
export function everyInterval(everyMs: number, logger: Logger, jobs: Record<string, () => Promise<unknown>>): () => void {
  if (everyMs <= 0) return () => undefined;
  const timer = setInterval(() => {
    for (const [name, job] of Object.entries(jobs)) job().catch((err) => logger.warn({ err }, `${name} failed`));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
