import type { Logger } from 'pino';

/** How a purge run (the expired idempotency keys', the events') deletes. */
export interface PurgeOptions {
  /** Rows per delete. */
  batch?: number;
  /** Deletes per run at most (no cap by default). */
  maxBatches?: number;
  /** True when the process is shutting down: the run ends after its current delete. */
  stopping?: () => boolean;
}

/**
 * Runs each job every `everyMs` off the request path (0: never) and returns the stop function.
 * A failed run is logged and the next tick tries again. A job whose previous run is still going
 * is not started again at a tick: a purge behind a large backlog runs until it has caught up
 * (the purges have no cap per run) instead of being joined by a second copy of itself every
 * tick. Each run gets `stopping`, true once stop was called, to end between two of its steps;
 * stop resolves when the runs in progress have ended. Used for the purges of expired
 * idempotency keys and events: several processes may all run them, the deletes are idempotent.
 */
export function everyInterval(everyMs: number, logger: Logger, jobs: Record<string, (stopping: () => boolean) => Promise<unknown>>): () => Promise<void> {
  if (everyMs <= 0) return async () => undefined;
  let stopped = false;
  const stopping = () => stopped;
  const running = new Map<string, Promise<unknown>>();
  const timer = setInterval(() => {
    for (const [name, job] of Object.entries(jobs)) {
      if (running.has(name)) continue;
      const run = job(stopping)
        .catch((err) => logger.warn({ err }, `${name} failed`))
        .finally(() => running.delete(name));
      running.set(name, run);
    }
  }, everyMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await Promise.all(running.values());
  };
}
