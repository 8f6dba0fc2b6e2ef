import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { spawn, ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { ROOT } from './build';

export interface ServerProcess {
  name: string;
  pid: number;
  url: string;
  /** Process start (spawn) to the first 200 from /healthz, in ms. */
  startMs: number;
  /** CPU time (user + system, every thread) the process has used so far, in ms; NaN off Linux. */
  cpuMs(): number;
  /** Peak resident set size so far, in MB (the larger of polled VmRSS and the kernel's VmHWM). */
  peakRssMb(): number;
  /** Stops the process (SIGTERM, then SIGKILL after 10 s); answers the peak RSS in MB. */
  stop(): Promise<number>;
}

export interface StartOptions {
  name: string;
  /** Arguments after `node` (script and its arguments; node flags first). */
  args: string[];
  env: Record<string, string>;
  /** The port is chosen here and passed as PORT. */
  timeoutMs?: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) : 0;
  } catch {
    return 0; // not Linux, or the process is gone
  }
}

/** utime + stime of /proc/<pid>/stat, in ms (USER_HZ is 100 on Linux). */
export function cpuMsOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

function healthy(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(`${url}/healthz`, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.setTimeout(1000, () => req.destroy());
  });
}

/**
 * Starts a server as a child process and waits for its first 200 from /healthz (polled every
 * 5 ms). Peak RSS is polled every 100 ms and read from VmHWM (the kernel's high-water mark) at
 * stop, so a short spike between polls still counts.
 */
export async function startServer(options: StartOptions): Promise<ServerProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, options.args, {
    cwd: ROOT,
    env: { ...process.env, ...options.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  let exited: number | null | undefined;
  const exit = new Promise<void>((resolve) => child.once('exit', (code) => { exited = code; resolve(); }));

  const deadline = started + (options.timeoutMs ?? 30_000);
  while (!(await healthy(url))) {
    if (exited !== undefined) throw new Error(`${options.name} exited with ${exited} before answering /healthz:\n${output}`);
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${options.name} did not answer /healthz within ${options.timeoutMs ?? 30_000} ms:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const startMs = performance.now() - started;

  const pid = child.pid!;
  let peakKb = 0;
  const sample = () => { peakKb = Math.max(peakKb, statusKb(pid, 'VmRSS'), statusKb(pid, 'VmHWM')); };
  sample();
  const poller = setInterval(sample, 100);
  poller.unref();

  let stopped: Promise<number> | undefined;
  return {
    name: options.name,
    pid,
    url,
    startMs,
    cpuMs: () => cpuMsOf(pid),
    peakRssMb: () => { sample(); return peakKb / 1024; },
    stop: () => {
      stopped ??= (async () => {
        sample();
        clearInterval(poller);
        if (exited === undefined) {
          child.kill('SIGTERM');
          const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
          await exit;
          clearTimeout(killer);
        }
        return peakKb / 1024;
      })();
      return stopped;
    },
  };
}

/** `node` arguments that run a TypeScript file of the bench (baseline servers) through tsx. */
export function tsxArgs(file: string, nodeFlags: string[] = []): string[] {
  return [...nodeFlags, '--import', 'tsx', file];
}
