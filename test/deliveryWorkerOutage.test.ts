import { Writable } from 'node:stream';
import pino from 'pino';
import { describeEachDatabase } from './support/testApp';
import { startDeliveryWorker } from '../runtime/webhooks/deliveryWorker';
import { loadConfig } from '../runtime/config';

// The delivery engine while the database refuses its claims (here: its table renamed away, as in
// an outage every statement fails): it logs the failure once with the error, then at most once
// per interval, asks once a second instead of every poll, and says when a claim works again.
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeEachDatabase('delivery engine while its claims fail', (t) => {
  it('logs the first failure, then at most once per interval, polls once a second, and logs the recovery', async () => {
    const lines: any[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } });
    let queries = 0;
    const counted = () => { queries++; };
    t.db.knex.on('query', counted);
    await t.db.knex.schema.renameTable('webhook_deliveries', 'webhook_deliveries_away');
    const worker = startDeliveryWorker({
      db: t.db.knex, settings: loadConfig({}), logger: pino({ level: 'info' }, sink), pollIntervalMs: 20, failureLogIntervalMs: 1500,
    });
    t.onClose(() => worker.stop()); // stopped below; here too should an assertion fail first
    try {
      await sleep(3500); // claims at about 0, 1, 2 and 3 s: logged at 0 and 2 s
      expect(lines.map((l) => l.msg)).toEqual(['claiming webhook deliveries failed; retrying every second', 'claiming webhook deliveries still fails']);
      expect(lines[0]).toMatchObject({ level: 40, err: { message: expect.stringContaining('webhook_deliveries') } });
      expect(lines[1]).toMatchObject({ level: 40, failures: expect.any(Number), failingForMs: expect.any(Number), error: expect.stringContaining('webhook_deliveries') });
      expect(lines[1].failures).toBeGreaterThanOrEqual(2);
      expect(lines[1].failingForMs).toBeGreaterThanOrEqual(1500);
      // one failing claim a second (each one statement), not one per 20 ms poll
      expect(queries).toBeLessThanOrEqual(6);
    } finally {
      t.db.knex.off('query', counted);
      await t.db.knex.schema.renameTable('webhook_deliveries_away', 'webhook_deliveries');
    }
    for (let i = 0; i < 40 && !lines.some((l) => l.msg === 'claiming webhook deliveries works again'); i++) await sleep(100);
    await worker.stop();
    const recovered = lines.find((l) => l.msg === 'claiming webhook deliveries works again');
    expect(recovered).toMatchObject({ level: 30, failures: expect.any(Number), failedForMs: expect.any(Number) });
    expect(recovered.failures).toBeGreaterThanOrEqual(2); // counted across the log lines, not one per line
    expect(lines.filter((l) => l.level >= 40)).toHaveLength(2);
  });
});
