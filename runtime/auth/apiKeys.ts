import { createHash, randomBytes } from 'node:crypto';
import { Knex } from 'knex';
import { operations } from '../../generated/operations';
import { newId } from '../ids';
import { nowIso } from '../time';
import { ApiError, unauthenticated } from '../errors';
import { inWriteTransaction } from '../storage/writeTransaction';
import {
  apiKeyExists,
  findApiKeyBySecretHash,
  findApiKeyRow,
  findOrganizationByName,
  insertApiKey,
  insertOrganization,
  listApiKeyRows,
  markApiKeyRevoked,
  shortenApiKeyExpiry,
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
  /** When the key stops working; null: never. */
  expiresAt: string | null;
}

export interface Principal {
  keyId: string;
  orgId: string;
  scopes: ReadonlySet<string>;
  /**
   * Whose Idempotency-Keys this key's requests use: its own id, or for a rolled key the id of the
   * first key of its roll chain (README, "API keys"), which every key of the chain shares, so that
   * a retry sent with the new secret replays.
   */
  idempotencyScope: string;
}

/** The secret is stored only as its SHA-256: with 256 random bits a slow hash adds nothing. */
function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export class UnknownScopeError extends Error {}

export async function createApiKey(
  db: Knex,
  options: { scopes: readonly string[]; organization?: string; name?: string; expiresAt?: string },
): Promise<{ key: ApiKeyInfo; secret: string }> {
  const { id, secret } = await inWriteTransaction(db, (trx) => insertNewKey(trx, options));
  const key = (await listApiKeys(db)).find((k) => k.id === id)!;
  return { key, secret };
}

/** A new key (and its organization, when new) in the transaction `trx`. */
async function insertNewKey(
  trx: Knex,
  options: { scopes: readonly string[]; organization?: string; name?: string; expiresAt?: string; idempotencyScope?: string },
): Promise<{ id: string; secret: string }> {
  const unknown = options.scopes.filter((s) => !ALL_SCOPES.includes(s));
  if (unknown.length) throw new UnknownScopeError(`unknown scope ${unknown.join(', ')}; valid scopes: ${ALL_SCOPES.join(', ')}`);
  if (options.scopes.length === 0) throw new UnknownScopeError(`no scope given; valid scopes: ${ALL_SCOPES.join(', ')}`);
  const orgName = options.organization ?? DEFAULT_ORGANIZATION;
  const secret = SECRET_PREFIX + randomBytes(32).toString('base64url');
  const now = nowIso();
  const id = newId('key');
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
    expires_at: options.expiresAt ?? null,
    idempotency_scope: options.idempotencyScope ?? null,
  });
  return { id, secret };
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
    expiresAt: r.expires_at,
  }));
}

export class UnknownKeyError extends Error {}

/**
 * Rolls a key: a new key with the same organization, scopes and name, and the old one made to
 * expire at `oldExpiresAt` (now: at once), so that clients can move to the new secret while the
 * old one still works. An old key that expires sooner keeps its expiry. A key made to expire
 * passes its lifetime on: the new key expires as long after its creation as the old one did
 * after its own (a 90-day key rolls into a 90-day key). Refused for a revoked or expired key
 * (there is nothing left to roll).
 */
export async function rollApiKey(db: Knex, keyId: string, oldExpiresAt: string): Promise<{ key: ApiKeyInfo; secret: string; old: ApiKeyInfo }> {
  const row = await findApiKeyRow(db, keyId);
  if (!row) throw new UnknownKeyError(`no key with id ${keyId}`);
  if (row.revoked_at) throw new UnknownKeyError(`key ${keyId} is revoked`);
  if (row.expires_at && row.expires_at <= nowIso()) throw new UnknownKeyError(`key ${keyId} expired at ${row.expires_at}`);
  // both or neither: never a new key beside an old one left without its expiry
  const { id, secret } = await inWriteTransaction(db, async (trx) => {
    const lifetimeMs = row.expires_at === null ? undefined : Date.parse(row.expires_at) - Date.parse(row.created_at);
    const expiresAt = lifetimeMs === undefined ? undefined : new Date(Date.now() + lifetimeMs).toISOString();
    // the new key joins the old one's roll chain and its Idempotency-Keys: a write pending when the client moved is replayed, not run again
    const made = await insertNewKey(trx, { scopes: row.scopes.split(' '), organization: row.org_name, name: row.name, expiresAt, idempotencyScope: row.idempotency_scope ?? row.id });
    await shortenApiKeyExpiry(trx, keyId, oldExpiresAt);
    return made;
  });
  forgetCachedKey(db, keyId);
  const keys = await listApiKeys(db);
  return { key: keys.find((k) => k.id === id)!, secret, old: keys.find((k) => k.id === keyId)! };
}

/** Revokes a key; it is refused from the next request on. False when no such key exists. */
export async function revokeApiKey(db: Knex, keyId: string): Promise<boolean> {
  const changed = await inWriteTransaction(db, (trx) => markApiKeyRevoked(trx, keyId, nowIso()));
  forgetCachedKey(db, keyId);
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

/** After a key changed here: this process reads it again at once; the others within PRINCIPAL_TTL_MS. */
function forgetCachedKey(db: Knex, keyId: string): void {
  const cache = principalCache(db);
  for (const [hash, entry] of cache) if (entry.principal.keyId === keyId) cache.delete(hash);
}
const PRINCIPAL_CACHE_MAX = 10_000;
const principalCaches = new WeakMap<Knex, Map<string, { principal: Principal; until: number }>>();

function principalCache(db: Knex): Map<string, { principal: Principal; until: number }> {
  let cache = principalCaches.get(db);
  if (!cache) principalCaches.set(db, (cache = new Map()));
  return cache;
}

/**
 * The 401 of a key that exists but no longer works (revoked, or past its expiry). Its holder is
 * not guessing — the answer already says the key is known — so it is not counted as a failed
 * authentication against the client's address (http/rateLimit.ts): a device left on a rolled
 * key must not lock out every valid client behind the same address. Carries the key's id for the
 * request's log line.
 */
export class InactiveKeyError extends ApiError {
  constructor(message: string, readonly keyId: string) {
    super('UNAUTHENTICATED', message, undefined, { 'WWW-Authenticate': 'Bearer' });
  }
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
    throw new InactiveKeyError('This API key has been revoked', row.id);
  }
  if (row.expires_at !== null && Date.parse(row.expires_at) <= now.getTime()) {
    cache.delete(hash);
    throw new InactiveKeyError(`This API key expired at ${row.expires_at}`, row.id);
  }
  if (!row.last_used_at || now.getTime() - Date.parse(row.last_used_at) > LAST_USED_RESOLUTION_MS) {
    await updateLastUsedAt(db, row.id, now.toISOString());
  }
  const principal: Principal = { keyId: row.id, orgId: row.org_id, scopes: new Set(String(row.scopes).split(' ')), idempotencyScope: row.idempotency_scope };
  if (cache.size >= PRINCIPAL_CACHE_MAX) cache.clear();
  // never kept past the key's expiry
  const until = now.getTime() + PRINCIPAL_TTL_MS;
  cache.set(hash, { principal, until: row.expires_at === null ? until : Math.min(until, Date.parse(row.expires_at)) });
  return principal;
}

