import cluster, { Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { serveClusterMetrics } from '../observability/metrics';

/**
 * WEB_CONCURRENCY > 1: the primary process forks that many workers that all listen on one port
 * (node's cluster module hands connections out). The primary serves nothing itself: it
 * prepares the database once (before forking), replaces a worker that dies, sums the workers'
 * metrics for /metrics, and on SIGTERM/SIGINT passes the signal on, waits for every worker to
 * drain and exits 0 when they all did.
 */
export function runPrimary(options: {
  workers: number;
  logger: Logger;
  shutdownTimeoutSeconds: number;
  /**
   * Called once, with the port, when the first worker listens (prints the bootstrap key); or,
   * with undefined, when a worker exits before any listened (the key is valid all the same).
   */
  onFirstListening(port: number | undefined): void;
}): void {
  const { logger } = options;
  serveClusterMetrics();
  let shuttingDown = false;
  let announced = false;
  let failedExits = 0;

  cluster.on('listening', (_worker, address) => {
    if (announced) return;
    announced = true;
    options.onFirstListening(address.port);
  });
  cluster.on('exit', (worker: Worker, code, signal) => {
    if (shuttingDown) {
      if (code !== 0) failedExits++;
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(failedExits ? 1 : 0);
      return;
    }
    if (!announced) {
      // no worker ever listened (the port is taken, the configuration is refused): replacing it would loop
      announced = true;
      options.onFirstListening(undefined);
      logger.error({ workerPid: worker.process.pid, code, signal }, 'a worker exited before listening; stopping');
      process.exit(code || 1);
    }
    logger.error({ workerPid: worker.process.pid, code, signal }, 'worker exited; starting another');
    // a worker that cannot start at all would otherwise be replaced in a tight loop. The timer
    // keeps the primary alive: when every worker died at once, nothing else would, and the primary
    // would exit 0 with nothing listening (a process manager takes 0 for a clean stop)
    setTimeout(() => { if (!shuttingDown) cluster.fork(); }, 1000);
  });

  const onSignal = (signal: NodeJS.Signals) => {
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info({ signal }, 'shutting down: draining every worker');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
    // the workers exit by themselves after their own timeout; this is the backstop
    setTimeout(() => process.exit(1), (options.shutdownTimeoutSeconds + 5) * 1000).unref();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  for (let i = 0; i < options.workers; i++) cluster.fork();
}
