import pino from 'pino';
import { everyInterval } from '../runtime/periodic';

// The purges' timer: a run still going is never joined by a second one, and stopping lets the
// run in progress end between two of its steps before stop resolves.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('everyInterval', () => {
  it('starts no second run of a job while one is going, and starts the next tick after it ended', async () => {
    let runs = 0;
    let finish: () => void = () => undefined;
    const stop = everyInterval(10, pino({ level: 'silent' }), {
      job: () => {
        runs++;
        return new Promise<void>((resolve) => { finish = resolve; });
      },
    });
    try {
      await sleep(150); // about 15 ticks
      expect(runs).toBe(1);
      finish();
      await sleep(100);
      expect(runs).toBeGreaterThanOrEqual(2);
    } finally {
      finish();
      await stop();
    }
  });

  it('tells a run in progress that the process is stopping, and stop resolves once it ended', async () => {
    const steps: string[] = [];
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => { started = resolve; });
    const stop = everyInterval(10, pino({ level: 'silent' }), {
      job: async (stopping) => {
        started();
        while (!stopping()) await sleep(5);
        await sleep(50); // the step in progress finishes
        steps.push('run ended');
      },
    });
    await running;
    await stop();
    steps.push('stop resolved');
    expect(steps).toEqual(['run ended', 'stop resolved']);
  });

  it('logs a failed run and runs the job again at a later tick', async () => {
    const warnings: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => { warnings.push(JSON.parse(line).msg); } });
    let runs = 0;
    const stop = everyInterval(10, logger, { purge: async () => { runs++; throw new Error('database away'); } });
    await sleep(100);
    await stop();
    expect(runs).toBeGreaterThanOrEqual(2);
    expect(warnings[0]).toBe('purge failed');
  });
});
