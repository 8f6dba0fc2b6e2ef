import path from 'node:path';

/** Server configuration: environment variables only (decisions.md §1), validated at start. */
export interface Config {
  port: number;
  host: string;
  /** `sqlite:` or `postgres:` URL; see parseDatabaseUrl. */
  databaseUrl: string;
  idempotencyTtlSeconds: number;
  /**
   * SQLite: how long a claim whose process stopped renewing it (renewed every second while the
   * request runs) is held before a retry may take it over. Keep it above the SQLite busy timeout
   * (5 s) plus a second. Postgres holds claims by a lock that ends with the owner's connection
   * and uses the lease only for claims committed by an older release.
   */
  idempotencyLeaseSeconds: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  maxBodyBytes: number;
  /** Origins allowed to call the API from a browser (CORS); empty means none. */
  corsOrigins: string[];
}

export class ConfigError extends Error {}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const DEFAULT_DATABASE_URL = `sqlite:${path.join('data', 'fieldops.sqlite')}`;

/** Reads and validates the configuration; a bad value throws one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: nonEmpty(env, 'HOST', '127.0.0.1'),
    databaseUrl: databaseUrl(env),
    idempotencyTtlSeconds: integer(env, 'IDEMPOTENCY_TTL_SECONDS', 86400, 1, 30 * 86400),
    idempotencyLeaseSeconds: integer(env, 'IDEMPOTENCY_LEASE_SECONDS', 8, 2, 3600),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', LOG_LEVELS),
    maxBodyBytes: integer(env, 'MAX_BODY_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    corsOrigins: origins(env),
  };
}

function raw(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`${name}=${JSON.stringify(value)} is invalid: expected a whole number from ${min} to ${max}`);
  }
  return Number(value);
}

function nonEmpty(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  return raw(env, name) ?? fallback;
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, fallback: T, allowed: readonly T[]): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) throw new ConfigError(`${name}=${JSON.stringify(value)} is invalid: expected one of ${allowed.join(', ')}`);
  return value as T;
}

function databaseUrl(env: NodeJS.ProcessEnv): string {
  const value = raw(env, 'DATABASE_URL') ?? DEFAULT_DATABASE_URL;
  if (!/^(sqlite:|postgres:\/\/|postgresql:\/\/)/.test(value)) {
    throw new ConfigError(`DATABASE_URL=${JSON.stringify(value)} is invalid: expected sqlite:path/to/file.sqlite, sqlite:///absolute/path.sqlite or postgres://user@host:port/database`);
  }
  return value;
}

function origins(env: NodeJS.ProcessEnv): string[] {
  const value = raw(env, 'CORS_ORIGINS');
  if (value === undefined) return [];
  const list = value.split(',').map((o) => o.trim()).filter(Boolean);
  for (const origin of list) {
    if (origin !== '*' && !/^https?:\/\/[^/\s]+$/.test(origin)) {
      throw new ConfigError(`CORS_ORIGINS contains ${JSON.stringify(origin)}: expected a comma-separated list of origins like https://app.example.com, or *`);
    }
  }
  return list;
}
