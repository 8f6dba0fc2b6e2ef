import { describeEachDatabase, TestContext, Method } from './support/testApp';
import { FIXTURE_ENV, fixtureClient, fixtures, implementedWrites } from './support/writeFixtures';

// Every write operation with a real handler replays under the same Idempotency-Key: the same
// status, body and Location with `Idempotent-Replayed: true`, and the database unchanged
// (docs/architecture.md, "Idempotency"). The requests are test/support/writeFixtures.ts: a new
// write operation fails "has a fixture for every implemented write operation" until it has one.

/** Every row of every table except the bookkeeping that each request may touch (key usage, idempotency, rate limits). */
async function snapshot(t: TestContext): Promise<Record<string, string[]>> {
  const tables: string[] =
    t.kind === 'sqlite'
      ? (await t.db.knex.raw(`select name from sqlite_master where type = 'table' and name not like 'sqlite_%'`)).map((r: { name: string }) => r.name)
      : (await t.db.knex.raw('select table_name as name from information_schema.tables where table_schema = current_schema()')).rows.map((r: { name: string }) => r.name);
  const result: Record<string, string[]> = {};
  for (const table of tables.filter((name) => !/^(knex_|_write_lock$|api_keys$|idempotency|rate_)/.test(name)).sort()) {
    result[table] = (await t.db.knex(table).select()).map((row) => JSON.stringify(row)).sort();
  }
  return result;
}

describe('replay fixtures', () => {
  it('has a fixture for every implemented write operation', () => {
    expect(implementedWrites.filter((op) => !fixtures[op.operationId]).map((op) => op.operationId)).toEqual([]);
  });
});

describeEachDatabase('idempotent replay of every write operation', (t) => {
  it.each(implementedWrites.map((op) => [op.operationId, op] as const))('%s', async (operationId, op) => {
    const { send, create, read } = fixtureClient(t, t.auth); // t.auth exists once the suite started
    const fixture = fixtures[operationId];
    if (!fixture) return; // reported by "has a fixture for every implemented write operation"
    const request = await fixture(create, read);
    const method = op.method as Method;
    const key = `replay-${operationId}`;

    const first = await send(method, request, key);
    if (first.status < 200 || first.status >= 300) {
      throw new Error(`the fixture's request must succeed; ${op.method.toUpperCase()} ${request.path} answered ${first.status}: ${JSON.stringify(first.body)}`);
    }
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const before = await snapshot(t);

    const again = await send(method, request, key);
    expect({ status: again.status, body: again.body, location: again.headers.location, replayed: again.headers['idempotent-replayed'] }).toEqual({
      status: first.status,
      body: first.body,
      location: first.headers.location,
      replayed: 'true',
    });
    expect(await snapshot(t)).toEqual(before);
  });
}, FIXTURE_ENV);
