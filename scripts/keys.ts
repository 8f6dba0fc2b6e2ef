/**
 * API key CLI (docs/architecture.md, "Running and configuration"), on the same DATABASE_URL as the server, safe while it runs:
 *
 *   npm run keys -- create --scopes users:read,users:write [--org acme] [--name ci] [--expires-in 90d]
 *   npm run keys -- create --scopes all [--org default] [--name walkthrough]   (every scope, as the key printed on first start)
 *   npm run keys -- list
 *   npm run keys -- roll <keyId> [--expires-in 24h]   (a new key like it; the old one expires then)
 *   npm run keys -- revoke <keyId>
 *
 * `create` and `roll` print the secret as the last line of stdout; it is never shown again.
 */
import { configOrExit, withoutPassword } from '../runtime/config';
import { openDatabase } from '../runtime/storage/database';
import { schemaBehind } from '../runtime/storage/migrate';
import { ALL_SCOPES, createApiKey, listApiKeys, revokeApiKey, rollApiKey, UnknownKeyError, UnknownScopeError } from '../runtime/auth/apiKeys';

const USAGE = `usage:
  npm run keys -- create --scopes <scope,scope,…|all> [--org <organization>] [--name <name>] [--expires-in <duration>]
  npm run keys -- list
  npm run keys -- roll <keyId> [--expires-in <duration>]
  npm run keys -- revoke <keyId>
scopes: ${ALL_SCOPES.join(', ')}; \`all\` gives every one of them
duration: a whole number and s, m, h or d (90d, 24h, 30m); roll's default is 24h, and 0 ends the old key at once;
  a rolled key that had an expiry passes its lifetime on to the new one`;

class UsageError extends Error {}

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const value = args[i + 1];
  if (value === undefined || value.startsWith('--')) throw new UsageError(`--${name} needs a value`);
  return value;
}

/** The longest organization or key name the database keeps (migration 0001). */
const MAX_NAME_CHARS = 100;

/** `--org` or `--name`: when given, not blank and at most MAX_NAME_CHARS characters, the same on SQLite and Postgres. */
function nameOption(args: string[], name: 'org' | 'name'): string | undefined {
  const value = option(args, name);
  if (value === undefined) return undefined;
  if (!value.trim()) throw new UsageError(`--${name} must not be blank`);
  if ([...value].length > MAX_NAME_CHARS) throw new UsageError(`--${name} is longer than ${MAX_NAME_CHARS} characters`);
  return value;
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** At most this far ahead: a longer-lived key is one that never expires (leave --expires-in out). */
const MAX_EXPIRY_DAYS = 3650;

/** The instant `--expires-in` names, from now; undefined when it is not given. `0` (now) only where `zero` allows it. */
function expiresIn(args: string[], { fallback, zero }: { fallback?: string; zero: boolean }): string | undefined {
  const value = option(args, 'expires-in') ?? fallback;
  if (value === undefined) return undefined;
  const match = /^(\d{1,7})([smhd])?$/.exec(value);
  if (!match || (match[2] === undefined && match[1] !== '0')) throw new UsageError(`--expires-in ${value} is not a duration: use a whole number and s, m, h or d (90d, 24h)${zero ? ', or 0' : ''}`);
  const ms = Number(match[1]) * UNIT_MS[match[2] ?? 's'];
  if (ms === 0 && !zero) throw new UsageError('--expires-in 0 would make a key that is expired already: give a duration (90d, 24h)');
  if (ms > MAX_EXPIRY_DAYS * UNIT_MS.d) throw new UsageError(`--expires-in ${value} is more than ${MAX_EXPIRY_DAYS} days: leave it out for a key that does not expire`);
  return new Date(Date.now() + ms).toISOString();
}

async function main(args: string[]): Promise<void> {
  const [command, ...rest] = args;
  if (command === '--help' || command === 'help') {
    console.log(USAGE);
    return;
  }
  // no command is a usage error, as an unknown one is (a script that lost its arguments must not pass)
  if (!command) throw new UsageError('a command is needed');
  const { databaseUrl } = configOrExit(); // a bad setting: one line and exit 2, as for the server
  // on stderr, so that stdout stays what scripts read: which database the keys are in (a CLI run
  // without the server's DATABASE_URL would otherwise work on another one, unnoticed)
  console.error(`database: ${withoutPassword(databaseUrl)}`);
  const database = openDatabase(databaseUrl);
  try {
    const behind = await schemaBehind(database.knex);
    if (behind) throw new Error(behind);
    if (command === 'create') {
      const scopes = option(rest, 'scopes');
      if (!scopes) throw new UsageError('create needs --scopes');
      const { key, secret } = await createApiKey(database.knex, {
        scopes: scopes.trim() === 'all' ? ALL_SCOPES : scopes.split(',').map((s) => s.trim()).filter(Boolean),
        organization: nameOption(rest, 'org'),
        name: nameOption(rest, 'name'),
        expiresAt: expiresIn(rest, { zero: false }),
      });
      console.log(`created key ${key.id} (${key.name}) in organization ${key.organization} with scopes ${key.scopes.join(' ')}${key.expiresAt ? `, expiring at ${key.expiresAt}` : ''}`);
      console.log('the secret below is shown only now:');
      console.log(secret);
    } else if (command === 'roll') {
      const id = rest[0];
      if (!id || id.startsWith('--')) throw new UsageError('roll needs a key id (see npm run keys -- list)');
      const { key, secret, old } = await rollApiKey(database.knex, id, expiresIn(rest.slice(1), { fallback: '24h', zero: true })!);
      console.log(`created key ${key.id} (${key.name}) in organization ${key.organization} with scopes ${key.scopes.join(' ')}${key.expiresAt ? `, expiring at ${key.expiresAt}` : ''}`);
      console.log(old.expiresAt! <= new Date().toISOString()
        ? `key ${old.id} stopped working at ${old.expiresAt}: its clients need the new secret now`
        : `key ${old.id} expires at ${old.expiresAt}: move its clients to the new secret before then`);
      console.log('the secret below is shown only now:');
      console.log(secret);
    } else if (command === 'list') {
      const keys = await listApiKeys(database.knex);
      if (keys.length === 0) console.log('no keys');
      for (const k of keys) {
        console.log([k.id, k.name, `org=${k.organization}`, `prefix=${k.prefix}…`, `scopes=${k.scopes.join(',')}`, `created=${k.createdAt}`,
          `lastUsed=${k.lastUsedAt ?? '-'}`, keyState(k)].join('  '));
      }
    } else if (command === 'revoke') {
      const id = rest[0];
      if (!id) throw new UsageError('revoke needs a key id (see npm run keys -- list)');
      const earlier = (await listApiKeys(database.knex)).find((k) => k.id === id)?.revokedAt;
      if (!(await revokeApiKey(database.knex, id))) throw new UsageError(`no key with id ${id}`);
      // revoking again changes nothing, and says so
      console.log(earlier ? `${id} was already revoked, at ${earlier}` : `revoked ${id}`);
    } else {
      throw new UsageError(`unknown command ${command}`);
    }
  } finally {
    await database.close();
  }
}

/** `active`, `active expires=…`, `EXPIRED=…` or `REVOKED=…`. */
function keyState(k: { revokedAt: string | null; expiresAt: string | null }): string {
  if (k.revokedAt) return `REVOKED=${k.revokedAt}`;
  if (k.expiresAt === null) return 'active';
  return k.expiresAt <= new Date().toISOString() ? `EXPIRED=${k.expiresAt}` : `active expires=${k.expiresAt}`;
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof UsageError || err instanceof UnknownScopeError || err instanceof UnknownKeyError) {
    console.error(`error: ${err.message}\n${USAGE}`);
    process.exit(2);
  }
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
