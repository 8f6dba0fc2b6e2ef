import { createHash, randomBytes } from 'node:crypto';
import { Knex } from 'knex';
import { operations } from '../../generated/operations';
import { newId } from '../ids';
import { nowIso } from '../time';
import { unauthenticated } from '../errors';
import { inWriteTransaction } from '../storage/writeTransaction';
import {
  apiKeyExists,
  findApiKeyBySecretHash,
  findOrganizationByName,
  insertApiKey,
  insertOrganization,
  listApiKeyRows,
  markApiKeyRevoked,
  updateLastUsedAt,
} from '../storage/repositories/apiKeysRepository';

/** Every scope some operation of the contract requires (the generated index), sorted. */
export const ALL_SCOPES: readonly string[] = [...new Set(Object.values(operations).flatMap((op) => op.scopes))].sort();

export const DEFAULT_ORGANIZATION = 'default';

const SECRET_PREFIX = 'fop_';
/** last_used_at is written at most this often per key, so reads do not turn into writes. */
const LAST_USED_RESOLUTION_MS = 60_000;

export interface ApiKeyInfo {
  id: string;
  name: string;
  organization: string;
  organizationId: string;
  scopes: string[];
  /** The first characters of the secret, to recognise it; never enough to use it. */
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export interface Principal {
  keyId: string;
  orgId: string;
  scopes: ReadonlySet<string>;
}

/** The secret is stored only as its SHA-256: with 256 random bits a slow hash adds nothing. */
function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export class UnknownScopeError extends Error {}

export async function createApiKey(
  db: Knex,
  options: { scopes: readonly string[]; organization?: string; name?: string },
): Promise<{ key: ApiKeyInfo; secret: string }> {
  const unknown = options.scopes.filter((s) => !ALL_SCOPES.includes(s));
  if (unknown.length) throw new UnknownScopeError(`unknown scope ${unknown.join(', ')}; valid scopes: ${ALL_SCOPES.join(', ')}`);
  if (options.scopes.length === 0) throw new UnknownScopeError(`no scope given; valid scopes: ${ALL_SCOPES.join(', ')}`);
  const orgName = options.organization ?? DEFAULT_ORGANIZATION;
  const secret = SECRET_PREFIX + randomBytes(32).toString('base64url');
  const now = nowIso();
  const id = newId('key');
  await inWriteTransaction(db, async (trx) => {
    let org = await findOrganizationByName(trx, orgName);
    if (!org) {
      org = { id: newId('org'), name: orgName, created_at: now };
      await insertOrganization(trx, org);
    }
    await insertApiKey(trx, {
      id,
      org_id: org.id,
      name: options.name ?? 'unnamed',
      prefix: secret.slice(0, 10),
      secret_hash: hashSecret(secret),
      scopes: [...new Set(options.scopes)].sort().join(' '),
      created_at: now,
    });
  });
  const key = (await listApiKeys(db)).find((k) => k.id === id)!;
  return { key, secret };
}

export async function listApiKeys(db: Knex): Promise<ApiKeyInfo[]> {
  const rows = await listApiKeyRows(db);
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    organization: r.org_name,
    organizationId: r.org_id,
    scopes: r.scopes.split(' '),
    prefix: r.prefix,
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
    revokedAt: r.revoked_at,
  }));
}

/** Revokes a key; it is refused from the next request on. False when no such key exists. */
export async function revokeApiKey(db: Knex, keyId: string): Promise<boolean> {
  const changed = await inWriteTransaction(db, (trx) => markApiKeyRevoked(trx, keyId, nowIso()));
  // this process refuses it at once; the others within PRINCIPAL_TTL_MS
  const cache = principalCache(db);
  for (const [hash, entry] of cache) if (entry.principal.keyId === keyId) cache.delete(hash);
  if (changed) return true;
  return apiKeyExists(db, keyId);
}

/**
 * How long a process keeps answering from a key row it read, instead of reading it again on
 * every request: a key revoked anywhere (another process, the key CLI) is refused by every
 * process at most this long after the revocation committed, inside the one second the
 * product allows (README, API keys; test/apiKeys.processes.test.ts proves it across two
 * server processes on each database). Only valid keys are kept, so a new key works at once; revoking in this process
 * drops its entries at once. Bounded in size: a burst of distinct keys cannot grow memory.
 */
const PRINCIPAL_TTL_MS = 500;
const PRINCIPAL_CACHE_MAX = 10_000;
const principalCaches = new WeakMap<Knex, Map<string, { principal: Principal; until: number }>>();

function principalCache(db: Knex): Map<string, { principal: Principal; until: number }> {
  let cache = principalCaches.get(db);
  if (!cache) principalCaches.set(db, (cache = new Map()));
  return cache;
}

/**
 * The principal behind an `Authorization: Bearer <secret>` header, from the key row read at
 * most PRINCIPAL_TTL_MS ago (above).
 */
export async function authenticate(db: Knex, authorization: string | undefined): Promise<Principal> {
  // the scheme name is case-insensitive (RFC 9110 §11.1)
  const match = /^Bearer +([A-Za-z0-9_-]{1,200})$/i.exec(authorization?.trim() ?? '');
  if (!match || !match[1].startsWith(SECRET_PREFIX)) throw unauthenticated();
  const hash = hashSecret(match[1]);
  const cache = principalCache(db);
  const cached = cache.get(hash);
  const now = new Date();
  if (cached && cached.until > now.getTime()) return cached.principal;
  const row = await findApiKeyBySecretHash(db, hash);
  if (!row) throw unauthenticated();
  if (row.revoked_at) {
    cache.delete(hash);
    throw unauthenticated('This API key has been revoked');
  }
  if (!row.last_used_at || now.getTime() - Date.parse(row.last_used_at) > LAST_USED_RESOLUTION_MS) {
    await updateLastUsedAt(db, row.id, now.toISOString());
  }
  const principal: Principal = { keyId: row.id, orgId: row.org_id, scopes: new Set(String(row.scopes).split(' ')) };
  if (cache.size >= PRINCIPAL_CACHE_MAX) cache.clear();
  cache.set(hash, { principal, until: now.getTime() + PRINCIPAL_TTL_MS });
  return principal;
}

