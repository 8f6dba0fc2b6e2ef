import { createHash } from 'node:crypto';
import { describeEachDatabase, anError } from './support/testApp';
import { startServerProcesses, ServerProcess } from './support/serverProcess';
import { revokeApiKey } from '../runtime/auth/apiKeys';

/** The product's bound: a revoked key is refused by every server process within one second. */
const REVOCATION_BOUND_MS = 1000;

async function sites(server: ServerProcess, auth: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${server.baseUrl}/v1/sites?limit=1`, { headers: { authorization: auth } });
  return { status: res.status, body: await res.json() };
}

describeEachDatabase('a revoked key across two server processes', (t) => {
  let servers: ServerProcess[] = [];
  beforeAll(async () => {
    servers = await startServerProcesses(2, { databaseUrl: t.db.url });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it('is refused by both within one second of the revocation, while both were using it', async () => {
    const auth = await t.newKey({ organization: 'revoked-across' });
    const hash = createHash('sha256').update(auth.slice('Bearer '.length)).digest('hex');
    const { id } = await t.db.knex('api_keys').where({ secret_hash: hash }).first('id');

    // both processes keep using the key up to the revocation, so whatever they remember of it is fresh
    let revoked = false;
    const beforeRevocation = servers.map(async (server) => {
      const statuses: number[] = [];
      while (!revoked) statuses.push((await sites(server, auth)).status);
      return statuses;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(await revokeApiKey(t.db.knex, id)).toBe(true); // committed when it returns: from another process than both servers
    revoked = true;
    for (const statuses of await Promise.all(beforeRevocation)) {
      expect(statuses.length).toBeGreaterThan(0);
      expect(statuses.filter((s) => s !== 200 && s !== 401)).toEqual([]);
    }

    await new Promise((r) => setTimeout(r, REVOCATION_BOUND_MS));
    for (const server of servers) {
      const res = await sites(server, auth);
      expect([server.baseUrl, res.status, res.body]).toEqual([server.baseUrl, 401, anError('UNAUTHENTICATED', { error: 'This API key has been revoked' })]);
    }
  }, 30_000);
});
