/**
 * API key CLI (docs/architecture.md, "Running and configuration"), on the same DATABASE_URL as the server, safe while it runs:
 *
 *   npm run keys -- create --scopes users:read,users:write [--org acme] [--name ci]
 *   npm run keys -- create --scopes all [--org default] [--name walkthrough]   (every scope, as the key printed on first start)
 *   npm run keys -- list
 *   npm run keys -- revoke <keyId>
 *
 * `create` prints the secret as the last line of stdout; it is never shown again.
 */
import { loadConfig } from '../runtime/config';
import { openDatabase } from '../runtime/storage/database';
import { schemaBehind } from '../runtime/storage/migrate';
import { ALL_SCOPES, createApiKey, listApiKeys, revokeApiKey, UnknownScopeError } from '../runtime/auth/apiKeys';

const USAGE = `usage:
  npm run keys -- create --scopes <scope,scope,…|all> [--org <organization>] [--name <name>]
  npm run keys -- list
  npm run keys -- revoke <keyId>
scopes: ${ALL_SCOPES.join(', ')}; \`all\` gives every one of them`;

class UsageError extends Error {}

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const value = args[i + 1];
  if (value === undefined || value.startsWith('--')) throw new UsageError(`--${name} needs a value`);
  return value;
}

async function main(args: string[]): Promise<void> {
  const [command, ...rest] = args;
  if (!command || command === '--help' || command === 'help') {
    console.log(USAGE);
    return;
  }
  const database = openDatabase(loadConfig().databaseUrl);
  try {
    const behind = await schemaBehind(database.knex);
    if (behind) throw new Error(behind);
    if (command === 'create') {
      const scopes = option(rest, 'scopes');
      if (!scopes) throw new UsageError('create needs --scopes');
      const { key, secret } = await createApiKey(database.knex, {
        scopes: scopes.trim() === 'all' ? ALL_SCOPES : scopes.split(',').map((s) => s.trim()).filter(Boolean),
        organization: option(rest, 'org'),
        name: option(rest, 'name'),
      });
      console.log(`created key ${key.id} (${key.name}) in organization ${key.organization} with scopes ${key.scopes.join(' ')}`);
      console.log('the secret below is shown only now:');
      console.log(secret);
    } else if (command === 'list') {
      const keys = await listApiKeys(database.knex);
      if (keys.length === 0) console.log('no keys');
      for (const k of keys) {
        console.log([k.id, k.name, `org=${k.organization}`, `prefix=${k.prefix}…`, `scopes=${k.scopes.join(',')}`, `created=${k.createdAt}`,
          `lastUsed=${k.lastUsedAt ?? '-'}`, k.revokedAt ? `REVOKED=${k.revokedAt}` : 'active'].join('  '));
      }
    } else if (command === 'revoke') {
      const id = rest[0];
      if (!id) throw new UsageError('revoke needs a key id (see npm run keys -- list)');
      if (!(await revokeApiKey(database.knex, id))) throw new UsageError(`no key with id ${id}`);
      console.log(`revoked ${id}`);
    } else {
      throw new UsageError(`unknown command ${command}`);
    }
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof UsageError || err instanceof UnknownScopeError) {
    console.error(`error: ${err.message}\n${USAGE}`);
    process.exit(2);
  }
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
