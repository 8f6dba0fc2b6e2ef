import { Worker } from 'node:worker_threads';

/**
 * SQLite WAL checkpoints off the request path.
 *
 * In WAL mode every commit appends its pages to the `-wal` file; a checkpoint copies them back
 * into the database file and syncs it. By default SQLite runs that checkpoint inside the commit
 * that makes the WAL reach 1 000 pages, and better-sqlite3 runs statements on the calling
 * thread: every few hundred writes one request stops the whole event loop for the copy and two
 * fsyncs (10–20 ms here), which the benchmark measured as about half of the database time of a
 * write (bench/README.md, "SQLite checkpoints").
 *
 * So each server process checkpoints from a worker thread of its own, on its own connection,
 * every CHECKPOINT_INTERVAL_MS, in PASSIVE mode: it copies what it can without waiting for or
 * blocking any reader or writer (it never takes the write lock). The request connection keeps
 * SQLite's own automatic checkpoint as the bound, at AUTOCHECKPOINT_PAGES (16 MB of WAL): when
 * sustained writing outruns the thread, or the thread is gone, the commit that reaches it
 * checkpoints as before — by then mostly already copied, so it is short — and the WAL starts
 * over. Durability is unchanged: `synchronous = NORMAL` on both connections.
 */
export const AUTOCHECKPOINT_PAGES = 4000;
export const CHECKPOINT_INTERVAL_MS = 100;

export interface Checkpointer {
  stop(): Promise<void>;
}

// Plain CommonJS run by the worker thread (eval): the same source serves `dist/` and the tests.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.filename, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch { /* busy or gone: the next tick, or the request connection's own bound */ }
}, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close(); });
`;

/** Starts the checkpoint thread of one SQLite file. It never keeps the process alive. */
export function startCheckpointer(filename: string, intervalMs = CHECKPOINT_INTERVAL_MS): Checkpointer {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { driver: require.resolve('better-sqlite3'), filename, intervalMs },
    // a thread that only runs one native call now and then: a small heap is plenty
    resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 },
  });
  worker.unref();
  // a thread that failed (file removed, driver error) only means commits checkpoint themselves again
  worker.on('error', () => undefined);
  let exited = false;
  worker.once('exit', () => { exited = true; });
  let stopped: Promise<void> | undefined;
  return {
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        if (exited) return resolve();
        worker.once('exit', () => resolve());
        worker.ref(); // keep the process alive until the thread is gone
        worker.postMessage('stop');
        // a checkpoint in progress finishes first; do not wait for a stuck one
        setTimeout(() => void worker.terminate(), 2000).unref();
      });
      return stopped;
    },
  };
}
