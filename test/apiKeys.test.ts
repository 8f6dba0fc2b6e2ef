import { ALL_SCOPES } from '../runtime/auth/apiKeys';
import { describeEachDatabase, anError } from './support/testApp';
import { runScript } from './support/scripts';
import { startWorkerProcess, type WorkerProcess } from './support/workerProcess';

/** `npm run keys -- …` as a user runs it, against the test database. */
const keysCli = (databaseUrl: string, ...args: string[]) => runScript('keys.ts', args, databaseUrl);

const lastLine = (text: string) => text.trim().split('\n').pop()!;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

describeEachDatabase('API keys', (t) => {
  it('the CLI creates a scoped key in a new organization, printing the secret last, once', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:write', '--org', 'acme', '--name', 'ci');
    expect(created.code).toBe(0);
    // it says which database it used, on stderr (stdout stays for scripts), a password hidden
    expect(created.stderr).toContain(`database: ${t.db.url.replace(/^(postgres(?:ql)?:\/\/[^:/@]+:)[^@]*@/, '$1***@')}`);
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
    const none = await keysCli(t.db.url);
    expect({ code: none.code, usage: none.stderr.includes('usage:') }).toEqual({ code: 2, usage: true });
    const help = await keysCli(t.db.url, '--help');
    expect({ code: help.code, usage: help.stdout.includes('usage:') }).toEqual({ code: 0, usage: true });
    expect((await keysCli(t.db.url, 'create')).stderr).toContain('create needs --scopes');
  });

  it('a key made with --expires-in works until then and is refused after, with the time it expired', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read', '--org', 'acme-expiring', '--name', 'short', '--expires-in', '6s');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/with scopes sites:read, expiring at \d{4}-\d\d-\d\dT[\d:.]+Z\n/);
    const auth = `Bearer ${lastLine(created.stdout)}`;
    await t.http.get('/v1/sites').set('Authorization', auth).expect(200);
    const line = () => keysCli(t.db.url, 'list').then((r) => r.stdout.split('\n').find((l) => l.includes('org=acme-expiring'))!);
    expect(await line()).toMatch(/  active expires=\S+Z$/);
    const expiresAt = /expiring at (\S+Z)/.exec(created.stdout)![1];
    // rolled with a later expiry, the old key keeps its own, sooner one; the new key gets the
    // old one's lifetime (6 s), so a key made to expire never rolls into one that does not
    const rolled = await keysCli(t.db.url, 'roll', /created key (key_\w+)/.exec(created.stdout)![1], '--expires-in', '1h');
    expect(rolled.stdout).toContain(`expires at ${expiresAt}: move its clients`);
    const successorExpiry = /with scopes sites:read, expiring at (\S+Z)\n/.exec(rolled.stdout)![1];
    const lifetime = Date.parse(successorExpiry) - Date.now();
    expect(lifetime).toBeGreaterThan(0);
    expect(lifetime).toBeLessThanOrEqual(6000);
    await sleep(Date.parse(expiresAt) - Date.now() + 50);
    const refused = await t.http.get('/v1/sites').set('Authorization', auth).expect(401);
    expect(refused.body).toEqual(anError('UNAUTHENTICATED', { error: `This API key expired at ${expiresAt}` }));
    expect(await line()).toMatch(new RegExp(`  EXPIRED=${expiresAt}$`));
  });

  it('roll: a new key with the same organization, scopes and name; the old one works until its new expiry, then not', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:write', '--org', 'acme-roll', '--name', 'integration');
    const oldAuth = `Bearer ${lastLine(created.stdout)}`;
    const oldId = /created key (key_\w+)/.exec(created.stdout)![1];
    await t.http.get('/v1/sites').set('Authorization', oldAuth).expect(200); // cached by this server process
    const site = (await t.http.post('/v1/sites').set('Authorization', oldAuth).send({ name: 'Before the roll' }).expect(201)).body;

    const rolled = await keysCli(t.db.url, 'roll', oldId, '--expires-in', '6s');
    expect(rolled.code).toBe(0);
    const newId = /created key (key_\w+) \(integration\) in organization acme-roll with scopes sites:read sites:write\n/.exec(rolled.stdout)![1];
    const expiresAt = new RegExp(`key ${oldId} expires at (\\S+Z): move its clients`).exec(rolled.stdout)![1];
    const newAuth = `Bearer ${lastLine(rolled.stdout)}`;
    // both work meanwhile, in the same organization
    expect((await t.http.get(`/v1/sites/${site.id}`).set('Authorization', newAuth).expect(200)).body.name).toBe('Before the roll');
    await t.http.get(`/v1/sites/${site.id}`).set('Authorization', oldAuth).expect(200);
    const listed = (await keysCli(t.db.url, 'list')).stdout.split('\n').filter((l) => l.includes('org=acme-roll'));
    expect(listed).toEqual([expect.stringMatching(new RegExp(`^${oldId}  integration .*  active expires=${expiresAt}$`)), expect.stringMatching(new RegExp(`^${newId}  integration .*  active$`))]);

    await sleep(Date.parse(expiresAt) - Date.now() + 50);
    expect((await t.http.get('/v1/sites').set('Authorization', oldAuth).expect(401)).body.error).toBe(`This API key expired at ${expiresAt}`);
    await t.http.get('/v1/sites').set('Authorization', newAuth).expect(200);
    // nothing left to roll in an expired key
    const again = await keysCli(t.db.url, 'roll', oldId);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`key ${oldId} expired at ${expiresAt}`);
  });

  it('roll: the new key goes on with the old one\'s Idempotency-Keys, so a retry sent with the new secret replays; another key does not', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:write', '--org', 'acme-roll-retry', '--name', 'field-app');
    const oldAuth = `Bearer ${lastLine(created.stdout)}`;
    const oldId = /created key (key_\w+)/.exec(created.stdout)![1];
    // the client sent a write with the old secret; its answer was lost; meanwhile the key was rolled
    const first = await t.http.post('/v1/sites').set('Authorization', oldAuth).set('Idempotency-Key', 'visit-1').send({ name: 'Pending at the roll' }).expect(201);
    const rolled = await keysCli(t.db.url, 'roll', oldId);
    const newAuth = `Bearer ${lastLine(rolled.stdout)}`;
    const newId = /created key (key_\w+)/.exec(rolled.stdout)![1];
    const retried = await t.http.post('/v1/sites').set('Authorization', newAuth).set('Idempotency-Key', 'visit-1').send({ name: 'Pending at the roll' }).expect(201);
    expect({ body: retried.body, replayed: retried.headers['idempotent-replayed'] }).toEqual({ body: first.body, replayed: 'true' });
    // and the other way, a write begun with the new secret and retried with the old one
    const begun = await t.http.post('/v1/sites').set('Authorization', newAuth).set('Idempotency-Key', 'visit-2').send({ name: 'Begun after the roll' }).expect(201);
    expect((await t.http.post('/v1/sites').set('Authorization', oldAuth).set('Idempotency-Key', 'visit-2').send({ name: 'Begun after the roll' }).expect(201)).body).toEqual(begun.body);
    // a key rolled from the rolled one too
    const rolledAgain = await keysCli(t.db.url, 'roll', newId);
    const thirdAuth = `Bearer ${lastLine(rolledAgain.stdout)}`;
    expect((await t.http.post('/v1/sites').set('Authorization', thirdAuth).set('Idempotency-Key', 'visit-1').send({ name: 'Pending at the roll' }).expect(201)).body).toEqual(first.body);
    // a key of its own, in the same organization, does not see them: the same value is a new operation
    const other = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:write', '--org', 'acme-roll-retry', '--name', 'other-app');
    const own = await t.http.post('/v1/sites').set('Authorization', `Bearer ${lastLine(other.stdout)}`).set('Idempotency-Key', 'visit-1').send({ name: 'Pending at the roll' }).expect(201);
    expect(own.headers['idempotent-replayed']).toBeUndefined();
    expect(own.body.id).not.toBe(first.body.id);
    const names = (await t.http.get('/v1/sites?limit=100').set('Authorization', newAuth).expect(200)).body.data.map((site: { name: string }) => site.name).sort();
    expect(names).toEqual(['Begun after the roll', 'Pending at the roll', 'Pending at the roll']);
  });

  it('a key rolled before the upgrade that shares Idempotency-Keys keeps its own; rolled again, its successor shares that one', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read,sites:write', '--org', 'acme-roll-before', '--name', 'legacy-app');
    const oldAuth = `Bearer ${lastLine(created.stdout)}`;
    const rolled = await keysCli(t.db.url, 'roll', /created key (key_\w+)/.exec(created.stdout)![1]);
    const rolledId = /created key (key_\w+)/.exec(rolled.stdout)![1];
    const rolledAuth = `Bearer ${lastLine(rolled.stdout)}`;
    // as an earlier version left it: no scope of its own (migration 0019 added the column empty)
    await t.db.knex('api_keys').where({ id: rolledId }).update({ idempotency_scope: null });
    await sleep(600); // past the half second a process keeps a key row it read
    const first = await t.http.post('/v1/sites').set('Authorization', oldAuth).set('Idempotency-Key', 'legacy-1').send({ name: 'Sent with the first key' }).expect(201);
    const separate = await t.http.post('/v1/sites').set('Authorization', rolledAuth).set('Idempotency-Key', 'legacy-1').send({ name: 'Sent with the first key' }).expect(201);
    expect(separate.body.id).not.toBe(first.body.id); // the README's upgrade note: its own keys, as before
    // rolled from now on, the chain starts at that key
    const again = await keysCli(t.db.url, 'roll', rolledId);
    const replayed = await t.http.post('/v1/sites').set('Authorization', `Bearer ${lastLine(again.stdout)}`).set('Idempotency-Key', 'legacy-1').send({ name: 'Sent with the first key' }).expect(201);
    expect({ body: replayed.body, replayed: replayed.headers['idempotent-replayed'] }).toEqual({ body: separate.body, replayed: 'true' });
  });

  it('roll --expires-in 0 ends the old key at once; revoked, unknown keys and bad durations are refused', async () => {
    const created = await keysCli(t.db.url, 'create', '--scopes', 'sites:read', '--org', 'acme-roll-now');
    const oldAuth = `Bearer ${lastLine(created.stdout)}`;
    const oldId = /created key (key_\w+)/.exec(created.stdout)![1];
    await t.http.get('/v1/sites').set('Authorization', oldAuth).expect(200);
    const rolled = await keysCli(t.db.url, 'roll', oldId, '--expires-in', '0');
    expect(rolled.code).toBe(0);
    expect(rolled.stdout).toContain(`key ${oldId} stopped working at `); // not "expires at" a time already past
    await sleep(600); // another process's cached read of the key lasts at most 500 ms
    await t.http.get('/v1/sites').set('Authorization', oldAuth).expect(401);
    await t.http.get('/v1/sites').set('Authorization', `Bearer ${lastLine(rolled.stdout)}`).expect(200);

    const revokedId = /created key (key_\w+)/.exec((await keysCli(t.db.url, 'create', '--scopes', 'sites:read', '--org', 'acme-roll-now')).stdout)![1];
    await keysCli(t.db.url, 'revoke', revokedId);
    // revoking again changes nothing, and says so
    expect(await keysCli(t.db.url, 'revoke', revokedId)).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^${revokedId} was already revoked, at \\S+Z\n$`)) });
    for (const [args, message] of [
      [['roll', revokedId], `key ${revokedId} is revoked`],
      [['roll', 'key_doesnotexist'], 'no key with id key_doesnotexist'],
      [['roll'], 'roll needs a key id'],
      [['roll', oldId, '--expires-in', '90'], '--expires-in 90 is not a duration'],
      [['create', '--scopes', 'sites:read', '--expires-in', '1y'], '--expires-in 1y is not a duration'],
      [['create', '--scopes', 'sites:read', '--expires-in', '-1d'], '--expires-in -1d is not a duration'],
      [['create', '--scopes', 'sites:read', '--expires-in', '3651d'], 'more than 3650 days'],
      [['create', '--scopes', 'sites:read', '--expires-in', '0'], '--expires-in 0 would make a key that is expired already'],
      // the same refusal on both databases (SQLite would keep any length, Postgres refused with its SQL)
      [['create', '--scopes', 'sites:read', '--org', ''], '--org must not be blank'],
      [['create', '--scopes', 'sites:read', '--org', 'acme-roll-now', '--name', ' '], '--name must not be blank'],
      [['create', '--scopes', 'sites:read', '--org', 'o'.repeat(101)], '--org is longer than 100 characters'],
      [['create', '--scopes', 'sites:read', '--org', 'acme-roll-now', '--name', 'n'.repeat(101)], '--name is longer than 100 characters'],
    ] as const) {
      const result = await keysCli(t.db.url, ...args);
      expect([args.join(' '), result.code, result.stderr]).toEqual([args.join(' '), 2, expect.stringContaining(message)]);
    }
    // nothing was created by the refused commands
    const listed = (await keysCli(t.db.url, 'list')).stdout.split('\n').filter((l) => l.includes('org=acme-roll-now'));
    expect(listed).toHaveLength(3);
  }, 120_000); // about twenty runs of the CLI, each a new process

  it('a bad setting stops the CLIs as it stops the server: one line, exit 2', async () => {
    for (const file of ['keys.ts', 'migrate.ts']) {
      const result = await runScript(file, file === 'keys.ts' ? ['list'] : [], t.db.url, 30_000, { RATE_LIMIT_STORE: 'redis', REDIS_URL: '' });
      expect([file, result.code, result.stderr.trim()]).toEqual([file, 2, 'Configuration error: RATE_LIMIT_STORE=redis needs REDIS_URL']);
    }
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
