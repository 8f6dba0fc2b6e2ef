import { emptyDatabase } from '../lib/database';
import { median } from '../lib/load';
import { Measurement, Settings, startApi } from './context';

/**
 * start: process start (spawn of the server as `npm start` runs it (`node --max-semi-space-size=4 --heap-growing-percent=100 dist/runtime/main.js`)) to the first 200 from /healthz.
 * "first start" is an empty database: the server migrates it and creates the first API key.
 * "restart" is the same database again, already migrated.
 */
export async function startScenario(settings: Settings): Promise<Measurement[]> {
  const first: number[] = [];
  const again: number[] = [];
  let peakRssMb = 0;
  for (let i = 0; i < settings.startRepetitions; i++) {
    const db = await emptyDatabase('start', settings.postgresUrl);
    try {
      for (const times of [first, again]) {
        const server = await startApi(settings, { serverUrl: db.url }, 'start');
        times.push(server.startMs);
        peakRssMb = Math.max(peakRssMb, await server.stop());
      }
    } finally {
      await db.dispose();
    }
  }
  settings.log(`  start: first ${first.map((t) => t.toFixed(0)).join(', ')} ms; restart ${again.map((t) => t.toFixed(0)).join(', ')} ms`);
  return [
    { scenario: 'start', subject: 'first start (empty database)', startMs: median(first), peakRssMb, note: `max ${Math.max(...first).toFixed(0)} ms`, detail: first },
    { scenario: 'start', subject: 'restart (migrated database)', startMs: median(again), note: `max ${Math.max(...again).toFixed(0)} ms`, detail: again },
  ];
}
