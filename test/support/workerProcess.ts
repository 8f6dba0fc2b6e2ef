import { spawn, ChildProcess } from 'node:child_process';
import path from 'node:path';
import { stopChild } from './serverProcess';

/**
 * A real `npm run worker` process (runtime/webhooks/workerMain.ts through tsx's require hook,
 * like serverProcess.ts), for the tests that kill one or run two on one database.
 */
export interface WorkerProcess {
  pid: number;
  output(): string;
  /** SIGKILL: no chance to finish or release anything. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

const ROOT = path.resolve(__dirname, '..', '..');

export async function startWorkerProcess(databaseUrl: string, env: NodeJS.ProcessEnv = {}): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--require', require.resolve('tsx/cjs'), path.join('runtime', 'webhooks', 'workerMain.ts')], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env, DATABASE_URL: databaseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start within 20 s:\n${output}`)), 20_000);
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
      if (output.includes('webhook delivery worker started')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`worker exited before starting:\n${output}`));
    });
  });
  await started;
  return {
    pid: child.pid!,
    output: () => output,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    stop: () => stopChild(child, exited, 5000),
  };
}
