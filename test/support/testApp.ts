import supertest from 'supertest';
import type { Test } from 'supertest';
import { createApp, App } from '../../runtime/http/app';
import { loadConfig, Config } from '../../runtime/config';
import { createApiKey, ALL_SCOPES } from '../../runtime/auth/apiKeys';
import { testDatabases, TestDatabase, TestDatabaseKind, warnIfPostgresSkipped } from './databases';
import { recordResponse } from './contractCheck';

export type Method = 'get' | 'post' | 'patch' | 'put' | 'delete';

export interface TestClient {
  get(url: string): Test;
  post(url: string): Test;
  patch(url: string): Test;
  put(url: string): Test;
  delete(url: string): Test;
}

/** supertest on an express app; every response is recorded for the contract check. */
export function testClient(app: App['app']): TestClient {
  const agent = supertest(app);
  const wrap = (method: Method) => (url: string) => {
    const test = agent[method](url);
    test.on('response', (res) => recordResponse(method, url, res));
    return test;
  };
  return { get: wrap('get'), post: wrap('post'), patch: wrap('patch'), put: wrap('put'), delete: wrap('delete') };
}

export interface TestContext {
  kind: TestDatabaseKind['name'];
  db: TestDatabase;
  app: App;
  config: Config;
  http: TestClient;
  /** A key with every scope in organization `default`: `Bearer …`. */
  auth: string;
  /** Creates another key and returns its Authorization header value. */
  newKey(options?: { scopes?: readonly string[]; organization?: string }): Promise<string>;
  /** Runs `cleanup` after the suite, before the app and database close (e.g. to stop a worker that uses them). */
  onClose(cleanup: () => Promise<void>): void;
  /** Another app (second connection pool) on the same database, as a second server process would be. */
  anotherApp(env?: NodeJS.ProcessEnv): { http: TestClient; close(): Promise<void> };
}

/**
 * The suites send hundreds of requests with one key (and some with bad keys) within a minute:
 * limits far above that keep them from being throttled. test/rateLimit.test.ts sets small ones.
 */
export const TEST_ENV: NodeJS.ProcessEnv = {
  LOG_LEVEL: 'silent',
  RATE_LIMIT_PER_MINUTE: '1000000',
  RATE_LIMIT_INGEST_BATCHES_PER_MINUTE: '1000000',
  RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '1000000',
};

/**
 * Runs `suite` once per test database (SQLite, and Postgres when TEST_DATABASE_URL is set),
 * each with a fresh database, a real app and a key with every scope.
 */
export function describeEachDatabase(title: string, suite: (ctx: TestContext) => void, env: NodeJS.ProcessEnv = {}): void {
  warnIfPostgresSkipped();
  for (const kind of testDatabases) {
    describe(`${title} [${kind.name}]`, () => {
      const ctx = { kind: kind.name } as TestContext;
      const cleanups: (() => Promise<void>)[] = [];
      beforeAll(async () => {
        ctx.db = await kind.create();
        ctx.config = loadConfig({ ...TEST_ENV, ...env });
        ctx.app = createApp(ctx.config, { db: ctx.db.knex, purgeIntervalMs: 0 });
        ctx.http = testClient(ctx.app.app);
        ctx.newKey = async (options = {}) => {
          const { secret } = await createApiKey(ctx.db.knex, { scopes: options.scopes ?? ALL_SCOPES, organization: options.organization });
          return `Bearer ${secret}`;
        };
        ctx.auth = await ctx.newKey();
        ctx.onClose = (cleanup) => void cleanups.push(cleanup);
        ctx.anotherApp = (moreEnv = {}) => {
          const other = ctx.db.openAnother();
          const app = createApp(loadConfig({ ...TEST_ENV, ...env, ...moreEnv }), { db: other.knex, purgeIntervalMs: 0 });
          const close = async () => { await app.close(); await other.close(); };
          cleanups.push(close);
          return { http: testClient(app.app), close };
        };
      });
      afterAll(async () => {
        for (const cleanup of cleanups) await cleanup().catch(() => undefined);
        await ctx.app?.close();
        await ctx.db?.destroy();
      });
      suite(ctx);
    });
  }
}

/**
 * `it` on the database `kind` only, `it.skip` on the other: a test that holds for one database's
 * mechanism is reported as skipped elsewhere instead of passing with nothing checked.
 */
export function itOn(ctx: { kind: string }, kind: 'sqlite' | 'postgres'): jest.It {
  return ctx.kind === kind ? it : it.skip;
}

/** Matchers for the volatile parts of a response. */
export const anId = (prefix: string) => expect.stringMatching(new RegExp(`^${prefix}_[0-9a-z]{24}$`));
export const aTimestamp = () => expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
export const aRequestId = () => expect.stringMatching(/^req_[0-9a-f]{20}$/);

/** The whole error body for `code`. */
export function anError(code: string, extra: Record<string, unknown> = {}) {
  return { error: expect.any(String), code, requestId: aRequestId(), ...extra };
}
