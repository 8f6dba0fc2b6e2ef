import knex, { Knex } from 'knex';
import type { SqliteConnection } from './sqliteGroupCommit';
import { awaitUnanswered, isPipelining, type PgClient } from './pgPipeline';

/**
 * How a write transaction lends its connection to the work it runs: a Knex instance of its own
 * (storage/writeTransaction.ts, storage/pgGroupCommit.ts), which also counts the statements that
 * may have changed something, so that a Postgres write that changed nothing can leave a shared
 * transaction without undoing the others' work (storage/pgGroupCommit.ts).
 */

/** A write transaction as the server's code holds it (storage/writeTransaction.ts, storage/pgGroupCommit.ts). */
export interface WriteTransaction {
  /** Runs statements on the transaction's connection, while the transaction is open. */
  readonly knex: Knex;
  readonly isOpen: boolean;
  /** `name` comes from the code, never from a request. */
  savepoint(name: string): Promise<void>;
  rollbackToSavepoint(name: string): Promise<void>;
  /**
   * Commits; when the COMMIT fails, rolls back what is left and throws its error (on SQLite the
   * error of the group commit it joined, which may come from another write transaction's work).
   */
  commit(): Promise<void>;
  /**
   * Ends the transaction keeping nothing. Never throws: a ROLLBACK that fails means the
   * connection is gone, and the transaction with it (the pool replaces a broken connection).
   */
  rollback(): Promise<void>;
}

/**
 * What the server's write transactions share (storage/writeTransaction.ts, storage/pgGroupCommit.ts):
 * the Knex instance lent to the work, and whether the transaction is still open.
 */
export abstract class LendingTransaction implements WriteTransaction {
  protected open = true;

  constructor(protected readonly lent: LentKnex) {}

  get knex(): Knex {
    return this.lent.knex;
  }

  get isOpen(): boolean {
    return this.open;
  }

  abstract savepoint(name: string): Promise<void>;
  abstract rollbackToSavepoint(name: string): Promise<void>;
  abstract commit(): Promise<void>;
  abstract rollback(): Promise<void>;

  protected mustBeOpen(): void {
    if (!this.open) throw new Error('This write transaction has ended.');
  }
}

export type PgConnection = PgClient;
export type Connection = SqliteConnection | PgConnection;

/** The Knex instance one transaction lends its connection through, until end(). */
export interface LentKnex {
  knex: Knex;
  /** How many statements that may change something ran through it so far. */
  changes(): number;
  /** Sets what runs before each statement that may change something or wait for a lock. */
  beforeWaiting(hook: () => void): void;
  /**
   * Sets what runs after a read that locked rows (`… for update`, `for share`) answered: the
   * first table it reads, the `id`s of the rows it locked, and whether the lock is exclusive
   * (`for update`, `for no key update`: the rows are about to change) or shared (`for share`,
   * `for key share`: they must not change meanwhile) (storage/pgGroupCommit.ts). A hook that
   * throws fails the read with its error.
   */
  onLockedRows(hook: LockedRowsHook): void;
  end(): void;
}

/** What runs after a read that locked rows answered (LentKnex.onLockedRows). */
export type LockedRowsHook = (table: string, ids: readonly string[], exclusive: boolean) => void;

/** Carried by every lending client, so that a nested begin is recognised. */
const LENDING = Symbol('lends a write transaction');

/** Whether `db` is the Knex instance of an open write transaction (they do not nest). */
export function isLent(db: Knex): boolean {
  return (db.client as { [LENDING]?: true })[LENDING] === true;
}

/**
 * Called by the driver-level write helpers (storage/database.ts) on the transaction's instance,
 * before the statement goes out: the transaction may change something, and (unless `mayWait` is
 * false: a statement that is known never to wait, such as the Idempotency-Key's claim) may wait
 * for a lock.
 * Statements through Knex's builder or `raw` are counted by the lending client itself (anything
 * but a plain select changes; a select that takes a lock may wait).
 */
export function noteChange(db: Knex, mayWait = true): void {
  const loan = (db.client as { loan?: Loan }).loan;
  if (loan === undefined) return;
  loan.changes++;
  if (mayWait) loan.beforeWaiting?.();
}

/**
 * The connection `db` lends when it is the Knex instance of an open write transaction, else
 * undefined: for work that runs synchronously on it (storage/database.ts, onSqliteConnection),
 * without the promises of Knex's acquire and release.
 */
export function lentConnection(db: Knex): Connection | undefined {
  return (db.client as { loan?: Loan }).loan?.conn;
}

/**
 * The connection one transaction lends, until it ends; shared by that transaction's clients. A
 * class, not a plain object: copies Knex makes of a client (`withUserParams` merges the client's
 * fields deeply) then share the loan instead of keeping a connection of their own.
 */
class Loan {
  changes = 0;
  /** Runs before a statement that may change something or wait for a lock (storage/pgGroupCommit.ts). */
  beforeWaiting?: () => void;
  /** Runs after a read that locked rows, with their table, ids and the lock's kind (storage/pgGroupCommit.ts). */
  onLockedRows?: LockedRowsHook;
  constructor(public conn: Connection | undefined) {}
}

const ENDED = 'This write transaction has ended: a statement ran on it after its commit or rollback.';

function borrow(loan: Loan): Promise<Connection> {
  return loan.conn === undefined ? Promise.reject(new Error(ENDED)) : Promise.resolve(loan.conn);
}

/** Per dialect client: the lending client class, made once. */
const lendingClasses = new WeakMap<object, new (config: Knex.Config) => Knex.Client>();

/**
 * A Knex instance over `conn` for one transaction, with a client of the same dialect and
 * settings as `db`'s. It is never reused: once the transaction ends, every statement through it
 * is refused, whatever runs on the connection later.
 *
 * The instance is made on first use. A Knex instance with its client costs about 20 µs of CPU
 * to make, more than a one-row insert; the statements every write runs go through the driver
 * (storage/database.ts) and need only the client's connection methods and settings, which a
 * plain object answers. So until the work touches anything else of the instance (the query
 * builder, `raw`, …), `trx.client` is that object; from then on both are the real one.
 * Use the instance itself (`trx('table')`, `trx.raw(…)`): Knex's `builder.transacting(trx)`,
 * which reads the client's fields and the instance's own keys, is not supported on it.
 */
export function lendTo(db: Knex, conn: Connection): LentKnex {
  const base = db.client as Knex.Client & { valueForUndefined: unknown; version?: string; logger: unknown };
  const loan = new Loan(conn);
  const light = {
    [LENDING]: true as const,
    config: base.config,
    loan,
    acquireConnection: () => borrow(loan),
    releaseConnection: () => Promise.resolve(),
  };
  let full: Knex | undefined;
  const real = (): Knex => (full ??= fullKnex(base, loan));
  // an arrow function as the target: callable like a Knex instance (`trx('table')`), and without
  // the non-configurable `prototype` a Proxy would have to answer as its target does
  const target = (() => undefined) as unknown as Knex;
  const knexOfLoan = new Proxy(target, {
    get: (_t, prop) => (prop === 'client' && full === undefined ? light : Reflect.get(real(), prop)),
    set: (_t, prop, value) => Reflect.set(real(), prop, value),
    has: (_t, prop) => Reflect.has(real(), prop),
    apply: (_t, thisArg, args) => Reflect.apply(real() as unknown as (...a: unknown[]) => unknown, thisArg, args),
  });
  return {
    knex: knexOfLoan,
    changes: () => loan.changes,
    beforeWaiting: (hook) => {
      loan.beforeWaiting = hook;
    },
    onLockedRows: (hook) => {
      loan.onLockedRows = hook;
    },
    end: () => {
      loan.conn = undefined;
    },
  };
}

/** The real Knex instance of one loan: its client answers the loan's connection while it lasts. */
function fullKnex(base: Knex.Client & { valueForUndefined: unknown; version?: string; logger: unknown }, loan: Loan): Knex {
  let Lending = lendingClasses.get(base);
  if (Lending === undefined) {
    const Dialect = base.constructor as unknown as new (config: Knex.Config) => Knex.Client;
    class LendingClient extends Dialect {
      loan = new Loan(undefined);
      async acquireConnection(): Promise<Connection> {
        const conn = await borrow(this.loan);
        // Knex's own statements wait for their answers one by one: the statements sent without
        // waiting are answered first, so that their failure is thrown as itself, not as the
        // "transaction is aborted" of the statement after it
        if (isPipelining(conn as PgConnection)) await awaitUnanswered(conn as PgConnection);
        return conn;
      }
      releaseConnection(): Promise<void> {
        return Promise.resolve();
      }
      async query(connection: unknown, queryParam: unknown): Promise<unknown> {
        // Knex's own transaction clients are made from the prototype, without the loan
        const loan = this.loan;
        if (loan === undefined) return super.query(connection, queryParam);
        const plain = isPlainSelect(queryParam);
        // a read that locks rows changes nothing, but may wait for another transaction's lock:
        // like every lock of a write, it must be taken behind the organization's write lock
        const locking = locksRows(queryParam);
        if (!plain) loan.changes++;
        if (!plain || locking || takesALock(queryParam)) loan.beforeWaiting?.();
        const answered = await super.query(connection, queryParam);
        if (locking && loan.onLockedRows) {
          // rows are told apart by their `id` (every table a write locks has one); a read that
          // selects no id has nothing to tell them by
          const rows = (answered as { response?: { rows?: { id?: unknown }[] } }).response?.rows ?? [];
          loan.onLockedRows(lockedTable(queryParam), rows.flatMap((row) => (row.id === undefined || row.id === null ? [] : [String(row.id)])), locksExclusively(queryParam));
        }
        return answered;
      }
    }
    // on the prototype, not the instance: the clients Knex derives from this one with
    // Object.create (a nested `trx.transaction()`) carry it too, so a nested begin is refused
    Object.defineProperty(LendingClient.prototype, LENDING, { value: true });
    Lending = LendingClient;
    lendingClasses.set(base, Lending);
  }
  // no `connection` setting: the client opens nothing and has no pool of its own
  const instance = knex({ client: Lending as unknown as typeof Knex.Client, useNullAsDefault: true });
  const client = instance.client as unknown as { config: unknown; transacting: boolean; valueForUndefined: unknown; version?: string; logger: unknown; loan: Loan };
  // what Knex's own transaction clients copy from the pool's client: its settings (the dialect's
  // name that dialectOf reads among them), what an undefined value inserts (DEFAULT on Postgres),
  // the server version and the logger; and what they say of themselves (the SQLite DDL compiler reads it)
  client.config = base.config;
  client.valueForUndefined = base.valueForUndefined;
  client.version = base.version;
  client.logger = base.logger;
  client.transacting = true;
  client.loan = loan;
  return instance;
}

function sqlOf(queryParam: unknown): string | undefined {
  const sql = typeof queryParam === 'string' ? queryParam : (queryParam as { sql?: unknown }).sql;
  return typeof sql === 'string' ? sql : undefined;
}

/** A select that locks the rows it reads (Postgres' `for update`, `for no key update`, `for share`, `for key share`). */
function locksRows(queryParam: unknown): boolean {
  const sql = sqlOf(queryParam);
  return sql !== undefined && /^\s*select\b/i.test(sql) && /\bfor\s+(no\s+key\s+)?(update|share|key\s+share)\b/i.test(sql);
}

/** Whether a locking read takes the rows' exclusive lock (`for update`, `for no key update`) rather than a shared one. */
function locksExclusively(queryParam: unknown): boolean {
  return /\bfor\s+(no\s+key\s+)?update\b/i.test(sqlOf(queryParam) ?? '');
}

/** The first table a locking read names (`from "sites"`, `from "runs" left join …`, `from "schema"."sites"`). */
function lockedTable(queryParam: unknown): string {
  return /\bfrom\s+(?:"?\w+"?\.)?"?(\w+)"?/i.exec(sqlOf(queryParam) ?? '')?.[1] ?? '';
}

/** A raw text that takes an advisory lock (the ordered inserts' `select pg_advisory_xact_lock(…)`). */
function takesALock(queryParam: unknown): boolean {
  const sql = typeof queryParam === 'string' ? queryParam : (queryParam as { sql?: unknown }).sql;
  return typeof sql === 'string' && /pg_advisory/i.test(sql);
}

/** A builder select, or a raw text that is one select and nothing else (no data-modifying WITH, no locking clause counts as a change). */
function isPlainSelect(queryParam: unknown): boolean {
  const q = (typeof queryParam === 'string' ? { sql: queryParam } : queryParam) as { method?: string; sql?: string };
  if (q.method === 'select' || q.method === 'first' || q.method === 'pluck') return true;
  return q.method === 'raw' && typeof q.sql === 'string' && /^\s*select\b/i.test(q.sql) && !/\b(insert|update|delete|for\s+update|for\s+share)\b/i.test(q.sql);
}
