import { ALL_SCOPES } from '../runtime/auth/apiKeys';
import { describeEachDatabase, anError } from './support/testApp';
import { runScript } from './support/scripts';
import { startWorkerProcess, type WorkerProcess } from './support/workerProcess';

/** `npm run keys -- …` as a user runs it, against the test database. */
const keysCli = (databaseUrl: string, ...args: string[]) => runScript('keys.ts', args, databaseUrl);

const lastLine = (text: string) => text.trim().split('\n').pop()!;

describeEachDatabase('API keys', (t) => {
  it('the CLI creates a scoped key in a new organization, printing the secret last, once', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:write', '--org', 'acme', '--name', 'ci');
    expect(created.code).toBe(0);
    const secret = lastLine(created.stdout);
    expect(secret).toMatch(/^fop_[A-Za-z0-9_-]{43}$/); // 32 random bytes = 256 bits

    // the key works at once against a server on the same database, only in its organization
    const auth = `Bearer ${secret}`;
    const site = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'Acme HQ' }).expect(201)).body;
    await t.http.get(`/v1/sites/${site.id}`).set('Authorization', t.auth).expect(404);
    await t.http.get('/v1/sites').set('Authorization', auth).expect(200);

    // stored only as a hash
    const rows = await t.db.knex('api_keys').select('*');
    expect(JSON.stringify(rows)).not.toContain(secret);

    const listed = await keysCli(t.db.url, 'list');
    expect(listed.code).toBe(0);
    const line = listed.stdout.split('\n').find((l) => l.includes('org=acme'))!;
    expect(line).toMatch(/^key_[0-9a-z]{24}  ci  org=acme  prefix=fop_\S{6}…  scopes=sites:read,sites:write  created=\S+  lastUsed=\S+  active$/);
    expect(listed.stdout).not.toContain(secret);

    const keyId = line.split('  ')[0];
    const revoked = await keysCli(t.db.url, 'revoke', keyId);
    expect(revoked).toMatchObject({ code: 0, stdout: `revoked ${keyId}\n` });
    const refused = await t.http.get('/v1/sites').set('Authorization', auth).expect(401);
    expect(refused.body).toEqual(anError('UNAUTHENTICATED'));
    expect((await keysCli(t.db.url, 'list')).stdout).toMatch(new RegExp(`${keyId}.*REVOKED=`));
  });

  it('--scopes all gives a key every scope, in the organization --org names (the README\'s lost-key line)', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'all', '--org', 'acme-all', '--name', 'walkthrough');
    expect(created.code).toBe(0);
    expect(created.stdout).toContain(`with scopes ${ALL_SCOPES.join(' ')}`);
    const auth = `Bearer ${lastLine(created.stdout)}`;
    // a read and a write of two different scopes both pass
    const site = (await t.http.post('/v1/sites').set('Authorization', auth).send({ name: 'All scopes' }).expect(201)).body;
    await t.http.get(`/v1/events?resourceId=${site.id}`).set('Authorization', auth).expect(200);
    const listed = (await keysCli(t.db.url, 'list')).stdout.split('\n').find((l) => l.includes('org=acme-all'))!;
    expect(listed).toContain(`scopes=${ALL_SCOPES.join(',')}`);
  });

  it('refuses an unknown scope with the list of valid ones, and bad usage', async () => {
    const bad = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:admin');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown scope sites:admin');
    expect(bad.stderr).toContain(ALL_SCOPES.join(', '));
    expect((await keysCli(t.db.url, 'revoke', 'key_doesnotexist')).code).toBe(2);
    expect((await keysCli(t.db.url, 'frobnicate')).code).toBe(2);
    expect((await keysCli(t.db.url, 'create')).stderr).toContain('create needs --scopes');
  });

  it('scopes come from the contract', () => {
    const { operations } = require('../generated/operations');
    const fromContract = new Set(Object.values(operations).flatMap((op: any) => op.scopes));
    expect([...fromContract].sort()).toEqual(ALL_SCOPES);
    expect(ALL_SCOPES).toEqual(expect.arrayContaining(['sites:read', 'sites:write']));
  });

  it('the CLI and a separate delivery engine never migrate: the CLI refuses while a migration is pending, the engine waits for it', async () => {
    // the database as an older version left it: the last migration not applied (its row taken out)
    const last = await t.db.knex('knex_migrations').orderBy('id', 'desc').first();
    await t.db.knex('knex_migrations').where({ id: last.id }).delete();
    let worker: WorkerProcess | undefined;
    try {
      const refused = await keysCli(t.db.url, 'list');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`the database's schema is behind this version (1 migration pending, from ${last.name.replace(/\.(ts|js)$/, '')}): run npm run migrate, or start the server, first`);
      expect(await t.db.knex('knex_migrations').where({ name: last.name }).first()).toBeUndefined();

      const waiting = startWorkerProcess(t.db.url);
      let started = false;
      void waiting.then(() => { started = true; }, () => undefined);
      await new Promise((resolve) => setTimeout(resolve, 3000));
      expect(started).toBe(false); // still waiting, and it applied nothing
      expect(await t.db.knex('knex_migrations').where({ name: last.name }).first()).toBeUndefined();
      await t.db.knex('knex_migrations').insert(last); // what npm run migrate records
      worker = await waiting;
      expect(worker.output()).toContain('run npm run migrate, or start the server, first; waiting');
    } finally {
      if (!(await t.db.knex('knex_migrations').where({ name: last.name }).first())) await t.db.knex('knex_migrations').insert(last);
      await worker?.stop();
    }
  }, 40_000);
});
