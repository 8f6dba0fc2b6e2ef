import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';

/** One autocannon phase, summarised. Latencies are exact (ms, from every response), not autocannon's 1-ms histogram. */
export interface Phase {
  seconds: number;
  requests: number;
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /**
   * Server CPU time (all threads) per response, in ms. Unlike throughput it hardly depends on
   * what else the machine runs, so its ratio to the baseline's is the steadier comparison.
   */
  cpuMsPerRequest: number;
  /** Responses outside 2xx plus connection errors and timeouts. */
  failures: number;
  statusCounts: Record<string, number>;
}

export interface LoadTarget {
  url: string;
  connections: number;
  /** Built afresh for each phase (autocannon keeps per-client state in them). */
  requests: () => autocannon.Request[];
  headers?: Record<string, string>;
  /** The server under load, for its CPU time. */
  server?: { cpuMs(): number };
}

export interface Plan {
  warmupSeconds: number;
  seconds: number;
  repetitions: number;
}

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Runs autocannon once against the target: for `seconds`, or until `amount` requests are
 * answered (every request sent is then answered: nothing is left in flight at the end).
 */
export function runPhase(target: LoadTarget, length: number | { amount: number }): Promise<Phase> {
  return new Promise((resolve, reject) => {
    let latencies = new Float64Array(1 << 16);
    let count = 0;
    const started = performance.now();
    let lastResponse = started;
    const cpuBefore = target.server?.cpuMs() ?? NaN;
    const instance = autocannon(
      {
        url: target.url,
        connections: target.connections,
        ...(typeof length === 'number' ? { duration: length } : { amount: length.amount }),
        headers: target.headers,
        requests: target.requests(),
        timeout: 30,
        sampleInt: 100, // end promptly once the last answer is in (autocannon stops on a tick)
      },
      (err, result) => {
        if (err) return reject(err);
        // from the start to the last answer: autocannon itself ends a phase only on its next
        // sampling tick, which would round an `amount` phase up to the tick
        const seconds = (lastResponse - started) / 1000;
        const cpuMs = (target.server?.cpuMs() ?? NaN) - cpuBefore;
        const sorted = latencies.subarray(0, count).sort();
        const statusCounts: Record<string, number> = {};
        for (const [status, stat] of Object.entries(result.statusCodeStats ?? {})) statusCounts[status] = stat.count ?? 0;
        resolve({
          seconds,
          requests: count,
          requestsPerSec: count / seconds,
          p50Ms: percentile(sorted, 50),
          p99Ms: percentile(sorted, 99),
          cpuMsPerRequest: cpuMs / count,
          failures: result.non2xx + result.errors + result.timeouts,
          statusCounts,
        });
      },
    );
    instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => {
      if (count === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2);
        bigger.set(latencies);
        latencies = bigger;
      }
      latencies[count++] = responseTime;
      lastResponse = performance.now();
    });
  });
}

export interface Measured {
  /** Median of each figure over the measured repetitions. */
  median: Omit<Phase, 'statusCounts'>;
  repetitions: Phase[];
  warmup: Phase | null;
  /** Failures in every phase, warm-up included (must be 0). */
  failures: number;
}

export function summarize(phases: Phase[], warmup: Phase | null): Measured {
  const pick = (f: (p: Phase) => number) => median(phases.map(f));
  return {
    median: {
      seconds: pick((p) => p.seconds),
      requests: pick((p) => p.requests),
      requestsPerSec: pick((p) => p.requestsPerSec),
      p50Ms: pick((p) => p.p50Ms),
      p99Ms: pick((p) => p.p99Ms),
      cpuMsPerRequest: pick((p) => p.cpuMsPerRequest),
      failures: pick((p) => p.failures),
    },
    repetitions: phases,
    warmup,
    failures: phases.reduce((n, p) => n + p.failures, warmup?.failures ?? 0),
  };
}

/**
 * Warm-up, then the measured repetitions. Several targets are measured interleaved (A, B, A,
 * B, …) so that a noisy neighbour slows each of them alike and the ratios stay meaningful.
 * `after` runs after every phase of a target (warm-up included), e.g. to check and reset state.
 */
export async function measureInterleaved(
  targets: { name: string; target: LoadTarget; after?: (phase: Phase) => Promise<void> }[],
  plan: Plan,
  log: (line: string) => void,
): Promise<Record<string, Measured>> {
  const warmups: Record<string, Phase | null> = {};
  const phases: Record<string, Phase[]> = {};
  for (const { name, target, after } of targets) {
    warmups[name] = null;
    phases[name] = [];
    if (plan.warmupSeconds > 0) {
      warmups[name] = await runPhase(target, plan.warmupSeconds);
      await after?.(warmups[name]!);
    }
  }
  for (let rep = 0; rep < plan.repetitions; rep++) {
    for (const { name, target, after } of targets) {
      const phase = await runPhase(target, plan.seconds);
      await after?.(phase);
      phases[name].push(phase);
      log(`    ${name} #${rep + 1}: ${phase.requestsPerSec.toFixed(0)} req/s, p50 ${phase.p50Ms.toFixed(2)} ms, p99 ${phase.p99Ms.toFixed(2)} ms, cpu ${phase.cpuMsPerRequest.toFixed(3)} ms/req${phase.failures ? `, ${phase.failures} FAILED ${JSON.stringify(phase.statusCounts)}` : ''}`);
    }
  }
  const out: Record<string, Measured> = {};
  for (const { name } of targets) out[name] = summarize(phases[name], warmups[name]);
  return out;
}
