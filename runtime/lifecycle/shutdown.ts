import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';

/** Work a process runs beside its requests (timers, workers); stopped on shutdown before the database closes. */
export interface BackgroundWork {
  name: string;
  /** Resolves once the work has stopped (a worker after its current attempt). */
  stop(): Promise<void>;
}

export interface ShutdownOptions {
  server: Server;
  logger: Logger;
  timeoutSeconds: number;
  background: BackgroundWork[];
  closeDatabase(): Promise<void>;
  /** Called with the exit code; process.exit unless a test replaces it. */
  exit?(code: number): void;
}

/**
 * SIGTERM/SIGINT: stop accepting connections, let the requests in flight finish, stop the
 * background work, close the database, exit 0. Requests still running after
 * SHUTDOWN_TIMEOUT_SECONDS are cut and the process exits 1; if even then something does not stop,
 * it exits 1 HARD_STOP_GRACE_SECONDS later. A second signal while draining
 * changes nothing (Ctrl-C in a terminal signals every process of a cluster at once).
 */
export function exitGracefullyOnSignals(options: ShutdownOptions): void {
  let shuttingDown = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (shuttingDown) return;
    shuttingDown = true;
    void drain(options, signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

async function drain(options: ShutdownOptions, signal: string): Promise<void> {
  const { server, logger } = options;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  logger.info({ signal, timeoutSeconds: options.timeoutSeconds }, 'shutting down: draining requests in flight');

  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    logger.warn({ timeoutSeconds: options.timeoutSeconds }, 'shutdown timeout: closing the connections still open');
    server.closeAllConnections();
  }, options.timeoutSeconds * 1000);
  deadline.unref();
  // the last resort: background work or the database that does not stop (a statement waiting on a
  // database that stopped answering, which no connection closing here ends) cannot keep the
  // process alive past the timeout and HARD_STOP_GRACE_SECONDS
  const hardStop = setTimeout(() => {
    logger.error({ timeoutSeconds: options.timeoutSeconds, graceSeconds: HARD_STOP_GRACE_SECONDS }, 'shutdown could not finish (background work or the database did not stop): exiting');
    exit(1);
  }, (options.timeoutSeconds + HARD_STOP_GRACE_SECONDS) * 1000);
  hardStop.unref();

  // every answer from now on closes its connection (`Connection: close`): a client that keeps its
  // connections busy (a load balancer's keep-alive pool) would otherwise send new requests on them
  // until the timeout, and the drain would end by cutting them
  server.prependListener('request', closeAfterAnswer);
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // close() stops accepting and drops idle keep-alive connections; a connection whose request
  // was in flight becomes idle when its answer is sent, and is dropped on the next pass
  const sweep = setInterval(() => server.closeIdleConnections(), 100);
  const stopped = Promise.all(options.background.map((work) =>
    work.stop().catch((err) => logger.error({ err, work: work.name }, 'background work did not stop cleanly'))));

  await Promise.all([closed, stopped]);
  clearInterval(sweep);
  clearTimeout(deadline);
  await options.closeDatabase().catch((err) => logger.error({ err }, 'closing the database failed'));
  clearTimeout(hardStop);
  logger.info({ timedOut }, 'stopped');
  exit(timedOut ? 1 : 0);
}

function closeAfterAnswer(_req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
}

/** How long after SHUTDOWN_TIMEOUT_SECONDS a shutdown that could not finish gives up and exits 1. */
export const HARD_STOP_GRACE_SECONDS = 5;
