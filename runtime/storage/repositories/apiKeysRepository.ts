import { Knex } from 'knex';
import { selectRows } from '../database';

/**
 * The SQL of the `api_keys` and `organizations` tables. Secrets, hashing, scope checks and
 * authentication decisions live in runtime/auth/apiKeys.ts; these functions only run statements.
 */

export interface OrganizationRow {
  id: string;
  name: string;
  created_at: string;
}

export interface ApiKeyRow {
  id: string;
  org_id: string;
  org_name: string;
  name: string;
  prefix: string;
  scopes: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  expires_at: string | null;
  idempotency_scope: string | null;
}

export interface NewApiKeyRow {
  id: string;
  org_id: string;
  name: string;
  prefix: string;
  secret_hash: string;
  scopes: string;
  created_at: string;
  expires_at: string | null;
  /** A rolled key: the scope of the key it was rolled from, i.e. the first key of the chain's id (migration 0019); null for a key of its own. */
  idempotency_scope?: string | null;
}

export type KeyLookupRow = { id: string; org_id: string; scopes: string; last_used_at: string | null; revoked_at: string | null; expires_at: string | null; idempotency_scope: string };
const KEY_LOOKUP_SQL = 'select id, org_id, scopes, last_used_at, revoked_at, expires_at, coalesce(idempotency_scope, id) as idempotency_scope from api_keys where secret_hash = ? limit 1';

export async function findOrganizationByName(db: Knex, name: string): Promise<OrganizationRow | undefined> {
  return db('organizations').where({ name }).first();
}

export async function insertOrganization(db: Knex, org: OrganizationRow): Promise<void> {
  await db('organizations').insert(org);
}

export async function insertApiKey(db: Knex, row: NewApiKeyRow): Promise<void> {
  await db('api_keys').insert(row);
}

/** Every key with its organization's name, oldest first. */
export async function listApiKeyRows(db: Knex): Promise<ApiKeyRow[]> {
  return db('api_keys')
    .join('organizations', 'organizations.id', 'api_keys.org_id')
    .select('api_keys.*', 'organizations.name as org_name')
    .orderBy('api_keys.created_at')
    .orderBy('api_keys.id');
}

/** Sets revoked_at on the key unless it is revoked already; returns how many rows changed. */
export async function markApiKeyRevoked(db: Knex, keyId: string, revokedAt: string): Promise<number> {
  return db('api_keys').where({ id: keyId }).whereNull('revoked_at').update({ revoked_at: revokedAt });
}

/**
 * Makes the key expire at `expiresAt` unless it is revoked, or expires before that already;
 * returns how many rows changed.
 */
export async function shortenApiKeyExpiry(db: Knex, keyId: string, expiresAt: string): Promise<number> {
  return db('api_keys').where({ id: keyId }).whereNull('revoked_at')
    .andWhere((q) => q.whereNull('expires_at').orWhere('expires_at', '>', expiresAt))
    .update({ expires_at: expiresAt });
}

export async function findApiKeyRow(db: Knex, keyId: string): Promise<ApiKeyRow | undefined> {
  return db('api_keys').join('organizations', 'organizations.id', 'api_keys.org_id')
    .where('api_keys.id', keyId).first('api_keys.*', 'organizations.name as org_name');
}

export async function apiKeyExists(db: Knex, keyId: string): Promise<boolean> {
  return Boolean(await db('api_keys').where({ id: keyId }).first());
}

export async function countApiKeys(db: Knex): Promise<number> {
  const row = await db('api_keys').count({ n: '*' }).first();
  return Number(row?.n ?? 0);
}

export async function findApiKeyBySecretHash(db: Knex, secretHash: string): Promise<KeyLookupRow | undefined> {
  // every request runs it: through the driver on Knex's connection (storage/database.ts)
  const [row] = await selectRows<KeyLookupRow>(db, KEY_LOOKUP_SQL, [secretHash]);
  return row;
}

export async function updateLastUsedAt(db: Knex, keyId: string, lastUsedAt: string): Promise<void> {
  await db('api_keys').where({ id: keyId }).update({ last_used_at: lastUsedAt });
}
