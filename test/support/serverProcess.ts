import { spawn, ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

/**
 * Real server processes (`runtime/main.ts` through tsx) for the tests that must prove nothing
 * consistent lives in process memory: two processes on one database behave as one.
 *
 * Bounded in time everywhere: start waits for /healthz at most `startTimeoutMs`, stop sends
 * SIGTERM and then SIGKILL after 3 s. The process's output is kept and shown when it fails.
 */
export interface ServerProcess {
  baseUrl: string;
  pid: number;
  /** What the process printed (stdout and stderr), for a failure message. */
  output(): string;
  /** Resolves when the process has exited, with its exit code and signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
}

export interface StartOptions {
  databaseUrl: string;
  env?: NodeJS.ProcessEnv;
  startTimeoutMs?: number;
}

const ROOT = path.resolve(__dirname, '..', '..');

/** Starts one server on a free port and resolves when its /healthz answers 200. */
export async function startServerProcess(options: StartOptions): Promise<ServerProcess> {
  // a free port can be taken by someone else between probing and binding: try a few
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await startOn(port, options);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

/** Starts several servers at once; when one fails, the others are stopped. */
export async function startServerProcesses(count: number, options: StartOptions): Promise<ServerProcess[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startServerProcess(options)));
  const servers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(servers.map((s) => s.stop()));
    throw failed.reason;
  }
  return servers;
}

async function startOn(port: number, options: StartOptions): Promise<ServerProcess> {
  // node with tsx's require hook runs main.ts in this very process: no npx/tsx wrapper whose
  // children a kill might miss
  const child = spawn(process.execPath, ['--require', require.resolve('tsx/cjs'), path.join('runtime', 'main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      ...options.env,
      DATABASE_URL: options.databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exitedWith = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const exited = exitedWith.then(() => undefined);

  const server: ServerProcess = {
    baseUrl: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    output: () => output,
    exited: exitedWith,
    stop: () => stopChild(child, exited, 3000),
  };
  try {
    await waitForHealth(server.baseUrl, child, options.startTimeoutMs ?? 20_000);
  } catch (err) {
    await server.stop();
    throw new Error(`${(err as Error).message}\n--- server output ---\n${output}`);
  }
  return server;
}

async function waitForHealth(baseUrl: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`server process exited (code ${child.exitCode}, signal ${child.signalCode}) before /healthz answered`);
    }
    try {
      const res = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server at ${baseUrl} did not answer /healthz within ${timeoutMs} ms`);
}

/** SIGTERM, then SIGKILL if the process has not exited within `graceMs`; for a test's cleanup. */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), graceMs).unref());
  if ((await Promise.race([exited, timer])) === 'timeout') {
    child.kill('SIGKILL');
    await exited;
  }
}

/** A port no one listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
