import net from 'node:net';
import { openDatabase, repeatsCounted } from '../runtime/storage/database';

// Knex warns once per failed connection attempt: during an outage, once per request and per poll.
// The database module prints each distinct line once a minute at most, with the count since.

describe('knex warnings during an outage', () => {
  it('a database that refuses connections: one line for many attempts, not one each', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as net.AddressInfo;
    await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
    const warned: string[] = [];
    const spy = jest.spyOn(console, 'warn').mockImplementation((line: unknown) => { warned.push(String(line)); });
    const db = openDatabase(`postgres://postgres@127.0.0.1:${port}/nothing`);
    try {
      for (let i = 0; i < 5; i++) await expect(db.knex.raw('select 1')).rejects.toThrow(/ECONNREFUSED/);
    } finally {
      spy.mockRestore();
      await db.close();
    }
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatch(/^Acquire connection error/);
    expect(warned[0]).not.toContain('\n');
  });

  it('prints a line again after the interval, with how many times it came meanwhile; other lines at once', () => {
    let clock = 0;
    const printed: string[] = [];
    const warn = repeatsCounted((line) => printed.push(line), 60_000, () => clock);
    warn('Acquire connection error: connect ECONNREFUSED\n    at stack');
    for (let i = 0; i < 7; i++) { clock += 1000; warn('Acquire connection error: connect ECONNREFUSED\n    at stack'); }
    warn('another warning');
    clock = 61_000;
    warn('Acquire connection error: connect ECONNREFUSED');
    expect(printed).toEqual([
      'Acquire connection error: connect ECONNREFUSED',
      'another warning',
      'Acquire connection error: connect ECONNREFUSED (and 7 more times in the last 61 s)',
    ]);
  });
});
