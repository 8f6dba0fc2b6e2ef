import type { Knex } from 'knex';
import type { ConnectionPool } from './connectionPool';
import { endPipelining, queryDiscardingEarlier, queryInOrder, rollBackAndRelease, sendWithoutWaiting, startPipelining, type PgClient } from './pgPipeline';
import { LendingTransaction, lendTo, type LentKnex, type WriteTransaction } from './lentKnex';
import { isWaitGivenUp } from './databaseErrors';

/**
 * Group commit for the write requests of one Postgres server process.
 *
 * Every write of an organization takes that organization's locks (the ordered insert's and the
 * event's: storage/orderedInsert.ts, the events repository) and holds them until its COMMIT has
 * been flushed to the WAL, so that rows become visible in the order of their `seq`. The writers
 * of one organization therefore pass one at a time, each waiting for the flush of the one before
 * — with a key, that flush and its wake-ups were two thirds of the write's time (bench/README.md).
 * So the write requests that arrive in the same turn of the event loop share one transaction on
 * one connection, and one flush:
 *
 * - The first one begins the batch (BEGIN, sent without waiting); the batch takes the requests of
 *   the current turn (it closes at its end, setImmediate) up to MAX_PG_BATCH — or, when the
 *   organization's previous batch in this process is still running, every request until that one
 *   has ended and to the end of the turn in which its own connection came (batchToJoin). Their statements
 *   go out pipelined on the batch's connection (storage/pgPipeline.ts), interleaved as the requests
 *   run, and the batch commits once all of them have finished.
 * - No savepoints: Postgres' savepoints nest, and the members interleave. Instead, a member whose
 *   work fails after it changed something marks the batch failed, and the batch rolls back
 *   (a member that changed nothing — a replay, a 404 — just leaves). A statement error aborts the
 *   whole transaction the same way, and its COMMIT rolls back.
 * - When a batch rolled back for certain (Postgres answered its COMMIT with ROLLBACK, or it failed
 *   and a ROLLBACK on the same connection then succeeded), every one of its requests runs again,
 *   alone, in a transaction of its own (inBatchOrAlone): none of their work was kept, so running it
 *   again is safe, and alone each gets exactly the answer it would have got without batching —
 *   the one that failed fails again, with its own error.
 * - When a statement of the batch was given up on after waiting (statement_timeout, lock_timeout:
 *   isWaitGivenUp), nothing runs again either: each member answers that error (a 503), where a run
 *   again waited as long again; and once one of the writes run again after a rollback waits out,
 *   those queued behind it answer its error without waiting (rerunsWaitedOut).
 * - When the outcome is unknown (the connection was lost around the COMMIT), nothing runs again:
 *   every member gets the error, as a write whose COMMIT was lost always did.
 * - Each member is answered only after the batch's COMMIT: what a client is told is stored, is.
 *
 * Only the requests' writes (idempotency/writes.ts) are batched, and only those without a step
 * that waits on the network (a handler's `prepare`): a batch holds the organization's locks until
 * its last member has finished. A write with such a step runs in a batch of its own
 * (inBatchOfItsOwn), which takes the organization's write lock the same way, after that step.
 * Everything else (the delivery engine, the purges, the API-key commands) begins a transaction of
 * its own (storage/writeTransaction.ts). SQLite has its own group commit
 * (storage/sqliteGroupCommit.ts).
 */

/** At most this many requests share one batch (bounds how long a member waits for the others). */
export const MAX_PG_BATCH = 16;

type Outcome = 'committed' | 'rolled back';

class PgBatch {
  readonly conn: Promise<PgClient>;
  members = 0;
  finished = 0;
  /** No member joins any more (the turn ended, or it is full). */
  closed = false;
  /** A member that changed something was rolled back: the batch must roll back. */
  failed = false;
  /** A statement of the batch that Postgres gave up on after waiting (see isWaitGivenUp): its error, answered to every member. */
  waitedOut: unknown;
  /** Of a batch whose writes run again one by one: the error of the first of those runs that waited out, answered by the runs after it without waiting again. */
  rerunsWaitedOut: unknown;
  /** The rows members read locked (`table:id`): the member holding it exclusively, or those sharing it. See rowLockedBy. */
  readonly lockedRows = new Map<string, { exclusive?: object; shared: Set<object> }>();
  private orgLocked = false;
  private settling = false;
  /** Resolves once the batch ended; rejects when the outcome of its COMMIT is unknown. */
  readonly outcome: Promise<Outcome>;
  private end!: { resolve(o: Outcome): void; reject(err: unknown): void };

  /** Settles once the batch has ended, whatever its outcome (its connection is back in the pool). */
  readonly ended: Promise<void>;

  constructor(
    readonly pool: ConnectionPool,
    readonly orgId: string,
    /** The end of the organization's previous shared batch in this process, if one is still running. */
    after?: Promise<void>,
    /** For a run again of a write: the batch that rolled back. */
    readonly rerunOf?: PgBatch,
  ) {
    this.outcome = new Promise<Outcome>((resolve, reject) => {
      this.end = { resolve, reject };
    });
    // read by every member; never an unhandled rejection when none is left to read it
    this.outcome.catch(() => undefined);
    this.ended = this.outcome.then(() => undefined, () => undefined);
    this.conn = (async () => {
      if (after) await after;
      // a run again before it waited out: this one would wait as long, for the same lock
      if (rerunOf?.rerunsWaitedOut !== undefined) throw rerunOf.rerunsWaitedOut;
      const conn = (await pool.acquireConnection()) as PgClient;
      startPipelining(conn);
      // answered with the first statement that waits
      sendWithoutWaiting(conn, 'BEGIN');
      return conn;
    })();
    this.conn.catch((err) => this.end.reject(err));
  }

  /**
   * Before the first statement of the batch that may change something or wait for a lock: the
   * organization's write lock, sent without waiting (the statement behind it waits for it).
   */
  lockOrganization(conn: PgClient): void {
    if (this.orgLocked) return;
    this.orgLocked = true;
    sendWithoutWaiting(conn, { name: 'fop_org_writes_lock', text: ORG_WRITES_LOCK_SQL, values: [this.orgId] });
  }

  /**
   * A member that leaves having changed nothing (a refusal after its checks): the rows it read
   * locked are no longer its own in rowLockedBy — it wrote none of them, so a later member may
   * lock them without rolling the batch back.
   */
  forget(member: object): void {
    for (const [row, held] of this.lockedRows) {
      held.shared.delete(member);
      if (held.exclusive === member) held.exclusive = undefined;
      if (held.exclusive === undefined && held.shared.size === 0) this.lockedRows.delete(row);
    }
  }

  /** A statement of the batch was given up on after waiting (isWaitGivenUp). */
  noteWaitedOut(err: unknown): void {
    this.waitedOut ??= err;
    if (this.rerunOf !== undefined) this.rerunOf.rerunsWaitedOut ??= err;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    const open = openBatches.get(this.pool);
    if (open?.get(this.orgId) === this) open.delete(this.orgId);
    this.settleWhenDone();
  }

  memberDone(): void {
    this.finished++;
    this.settleWhenDone();
  }

  private settleWhenDone(): void {
    if (!this.closed || this.finished < this.members || this.settling) return;
    this.settling = true;
    void this.settle();
  }

  private async settle(): Promise<void> {
    let conn: PgClient;
    try {
      conn = await this.conn;
    } catch {
      return; // the batch never began: its members were told when they joined
    }
    let outcome: Outcome | undefined;
    let failure: unknown;
    if (!this.failed) {
      try {
        // with the answers of every statement the members sent without waiting
        const done = await queryInOrder(conn, 'COMMIT');
        outcome = done.command === 'ROLLBACK' ? 'rolled back' : 'committed';
      } catch (err) {
        failure = err;
      }
    }
    if (outcome === 'committed') {
      endPipelining(conn);
      await this.pool.releaseConnection(conn);
      this.end.resolve(outcome);
      return;
    }
    if (failure !== undefined && isWaitGivenUp(failure)) this.noteWaitedOut(failure);
    // Rolled back, failed, or a COMMIT that threw: a ROLLBACK that succeeds on the same
    // connection proves nothing was kept (the COMMIT, if it reached Postgres, rolled back)
    const rolledBack = (await rollBackAndRelease(this.pool, conn)) || outcome === 'rolled back';
    if (rolledBack) this.end.resolve('rolled back');
    else this.end.reject(failure ?? new BatchConnectionLost());
  }
}

/**
 * The organization's write lock, taken by a batch before its first statement that may change
 * something or wait for a lock: every lock a request's write takes (the ordered inserts', the
 * event's, its rows') is taken behind it, so two batches never each hold a lock the other waits
 * for. Before it come only the Idempotency-Keys' claims, which never wait (their key's lock is
 * tried, not waited for), so that a duplicate of a running request is still refused at once.
 * `writes` is not a table name (those name the ordered inserts' locks).
 */
const ORG_WRITES_LOCK_SQL = `select pg_advisory_xact_lock(hashtext('writes'), hashtext($1))`;

/** Per connection pool (a database handle) and organization: the batch that takes members now. */
const openBatches = new WeakMap<object, Map<string, PgBatch>>();
/** Per connection pool and organization: the latest shared batch, until it has ended. */
const lastBatches = new WeakMap<object, Map<string, PgBatch>>();

/** The organizations' batches of one pool in `byPool`, made on first use. */
function ofPool(byPool: WeakMap<object, Map<string, PgBatch>>, pool: object): Map<string, PgBatch> {
  let batches = byPool.get(pool);
  if (batches === undefined) byPool.set(pool, (batches = new Map()));
  return batches;
}

/**
 * A new shared batch of an organization takes its connection only once the organization's
 * previous shared batch in this process has ended, and takes members until then (up to
 * MAX_PG_BATCH) and to the end of the turn in which its connection came. The batches of one
 * organization pass its write lock one at a time anyway; waiting for it here instead of on a
 * pooled connection keeps a burst of one organization's writes from holding every connection of
 * the pool (each new batch waiting on the lock), which left other organizations' requests and
 * reads without one and answered 503 once the pool's acquire timeout passed. The writes that
 * arrive meanwhile share the next batch, so a burst makes fewer, fuller batches.
 * A batch of its own (`alone`) neither waits nor is waited for: a write with a step that waits on
 * the network must not hold up the others (inBatchOfItsOwn).
 */
function batchToJoin(db: Knex, orgId: string, alone: boolean, rerunOf?: PgBatch): PgBatch {
  const rerun = rerunOf !== undefined;
  const pool = db.client as unknown as ConnectionPool;
  const last = ofPool(lastBatches, pool);
  if (alone) {
    // a batch of its own, closed to others from the start. A write of a rolled-back batch run
    // again (`rerun`) takes its connection, like a shared batch, once the organization's batch
    // before it has ended, so that those writes hold one pooled connection at a time, not one
    // each; a write with a step that waits on the network neither waits nor is waited for
    const own = new PgBatch(pool, orgId, rerun ? last.get(orgId)?.ended : undefined, rerunOf);
    if (rerun) {
      last.set(orgId, own);
      void own.ended.then(() => {
        if (last.get(orgId) === own) last.delete(orgId);
      });
    }
    own.members++;
    own.close();
    return own;
  }
  const open = ofPool(openBatches, pool);
  let batch = open.get(orgId);
  if (batch === undefined) {
    const opened = new PgBatch(pool, orgId, last.get(orgId)?.ended);
    open.set(orgId, opened);
    last.set(orgId, opened);
    void opened.ended.then(() => {
      if (last.get(orgId) === opened) last.delete(orgId);
    });
    // closes at the end of the turn in which its connection came (at once when it never came)
    opened.conn.then(() => setImmediate(() => opened.close()), () => opened.close());
    batch = opened;
  }
  batch.members++;
  if (batch.members >= MAX_PG_BATCH) batch.close();
  return batch;
}

/**
 * A batch whose connection was lost before it could end, its outcome unknown to its members: the
 * database is unavailable to them, as for any lost connection (a 503 to retry, with the
 * Idempotency-Key), not a failure of their own (databaseErrors.ts, isDatabaseUnavailable).
 */
class BatchConnectionLost extends Error {
  readonly code = 'ECONNRESET';
  constructor() {
    super('The group commit was lost with its connection.');
  }
}

/** Thrown by a member's commit when its batch rolled back: the request runs again, alone. */
class BatchRolledBack extends Error {
  constructor() {
    super('The group commit this write joined rolled back; the write runs again on its own.');
  }
}

class BatchMember extends LendingTransaction {
  private changesAtSavepoint = 0;

  constructor(
    private readonly batch: PgBatch,
    lent: LentKnex,
    private readonly conn: PgClient,
    /** The only member of its batch: its savepoints are real ones. */
    private readonly alone: boolean,
  ) {
    super(lent);
  }

  async savepoint(name: string): Promise<void> {
    this.mustBeOpen();
    this.changesAtSavepoint = this.lent.changes();
    // answered with the next statement that waits
    if (this.alone) sendWithoutWaiting(this.conn, `savepoint ${name}`);
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    this.mustBeOpen();
    // what the statements sent since the savepoint failed with is undone with them
    if (this.alone) {
      await queryDiscardingEarlier(this.conn, `rollback to savepoint ${name}`);
      return;
    }
    // nothing changed since: nothing to undo
    if (this.lent.changes() === this.changesAtSavepoint) return;
    // the other members' work cannot be kept without this member's being kept too
    this.batch.failed = true;
    this.lent.end();
  }

  async commit(): Promise<void> {
    this.mustBeOpen();
    this.open = false;
    this.lent.end();
    this.batch.memberDone();
    // rejects when the outcome is unknown: that error is this write's too
    if ((await this.batch.outcome) === 'rolled back') throw new BatchRolledBack();
  }

  async rollback(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    // a member that changed nothing leaves without undoing the others' work
    if (this.lent.changes() > 0) this.batch.failed = true;
    else this.batch.forget(this);
    this.lent.end();
    this.batch.memberDone();
  }
}

/** Marks a Knex handle whose write transactions join the process' batch (inBatchOrAlone). */
const SCOPE = Symbol('joins the group commit');

interface Scope {
  orgId: string;
  /** A batch of its own (the run again after a rollback), not shared with other requests. */
  alone: boolean;
  /** The run again of a write whose batch (this one) rolled back (batchToJoin chains it behind the organization's batch before it). */
  rerunOf?: PgBatch;
  member?: BatchMember;
  batch?: PgBatch;
}

/**
 * The write transaction of `db` when `db` is a handle made by inBatchOrAlone: a member of the
 * batch of this turn. Answers undefined for any other handle.
 */
export async function joinBatchOf(db: Knex): Promise<WriteTransaction | undefined> {
  const scope = (db as unknown as { [SCOPE]?: Scope })[SCOPE];
  if (scope === undefined) return undefined;
  // a second transaction could commit in another batch than the first: running both again
  // after one of them rolled back would repeat the other's work
  if (scope.batch !== undefined) throw new Error('A batched write runs one write transaction.');
  const real = (db as unknown as { [REAL]: Knex })[REAL];
  const batch = batchToJoin(real, scope.orgId, scope.alone, scope.rerunOf);
  scope.batch = batch;
  let conn: PgClient;
  try {
    conn = await batch.conn;
  } catch (err) {
    batch.memberDone();
    throw err;
  }
  const lent = lendTo(real, conn);
  lent.beforeWaiting(() => batch.lockOrganization(conn));
  const member = new BatchMember(batch, lent, conn, scope.alone);
  lent.onLockedRows((table, ids, exclusive) => rowLockedBy(batch, member, table, ids, exclusive));
  scope.member = member;
  return member;
}

/**
 * A member read rows locking them: exclusively when it is about to change or delete them (an
 * update or a delete reads the resource's state first: `findSiteForUpdate` and the like), shared
 * when it only needs them to stay as they are until it commits (a create or an update checks
 * that the site it names is live: `findSiteForReference`). Row locks are a transaction's, and the members of a
 * batch share one, so a second member reading a row the first one locked would not wait for the
 * first to finish: it would read the state between the first one's statements, and build its
 * change, its answer and its event on it — two PATCHes of one site each answering and recording
 * the other's change, or a PATCH answering 200 on a template another member had just deleted. So
 * when one of the two locks is exclusive, the second member's read fails, and the batch rolls
 * back: every one of its requests runs again alone, one after the other behind the organization's
 * write lock, as for any batch that rolled back (inBatchOrAlone). Shared locks of several members
 * (many assets created on one site in the same turn) go together. Two requests changing one row in
 * the same turn are rare; a rolled-back batch costs them a second run, never a wrong answer.
 */
function rowLockedBy(batch: PgBatch, member: object, table: string, ids: readonly string[], exclusive: boolean): void {
  for (const id of ids) {
    const row = `${table}:${id}`;
    const held = batch.lockedRows.get(row) ?? { shared: new Set<object>() };
    const others = (held.exclusive !== undefined && held.exclusive !== member) || (exclusive && [...held.shared].some((m) => m !== member));
    if (others) {
      batch.failed = true;
      throw new BatchRowConflict(row);
    }
    if (exclusive) held.exclusive = member;
    else held.shared.add(member);
    batch.lockedRows.set(row, held);
  }
}

/** Thrown by a member's locking read of a row another member of its batch locked (rowLockedBy). */
class BatchRowConflict extends Error {
  constructor(row: string) {
    super(`Another write of this group commit changes ${row}; the batch rolls back and its writes run again one by one.`);
  }
}

const REAL = Symbol('the handle under a batching handle');

/**
 * Runs `attempt` with a handle whose write transaction joins this turn's batch of organization
 * `orgId`, and answers what it answered once the batch has committed. When the batch rolled back
 * for certain, runs `attempt` again in a batch of its own (still behind the organization's write
 * lock). `attempt` must begin at most one write transaction, and must not wait on the network
 * inside it.
 */
export async function inBatchOrAlone<T>(db: Knex, orgId: string, attempt: (db: Knex) => Promise<T>): Promise<T> {
  const first = await attemptIn(db, { orgId, alone: false }, attempt);
  if (first.rolledBack) return (await attemptIn(db, { orgId, alone: true, rerunOf: first.batch }, attempt)).answer();
  return first.answer();
}

/**
 * Runs `attempt` once, in a batch of its own (real savepoints, the organization's write lock taken
 * before its first statement that may change something or wait for a lock): for a write with a
 * step that waits on the network, which must not hold a shared batch, but whose locks must still
 * come behind the organization's write lock like every other request's.
 */
export async function inBatchOfItsOwn<T>(db: Knex, orgId: string, attempt: (db: Knex) => Promise<T>): Promise<T> {
  return (await attemptIn(db, { orgId, alone: true }, attempt)).answer();
}

async function attemptIn<T>(db: Knex, scope: Scope, attempt: (db: Knex) => Promise<T>): Promise<{ rolledBack: boolean; answer(): T; batch?: PgBatch }> {
  const handle = new Proxy(db, {
    get: (target, prop) => (prop === SCOPE ? scope : prop === REAL ? target : Reflect.get(target, prop)),
  });
  let answer: () => T;
  try {
    const result = await attempt(handle);
    answer = () => result;
  } catch (err) {
    if (scope.batch !== undefined && isWaitGivenUp(err)) scope.batch.noteWaitedOut(err);
    answer = () => {
      throw err;
    };
  }
  // a member left open by a path that forgot it would hold the batch forever
  if (scope.member?.isOpen) await scope.member.rollback();
  const outcome = scope.batch === undefined ? undefined : await scope.batch.outcome.catch(() => undefined);
  const waitedOut = scope.batch?.waitedOut;
  if (outcome === 'rolled back' && waitedOut !== undefined) {
    // not run again: it would wait as long again (twice DATABASE_QUERY_TIMEOUT_SECONDS before
    // its 503), one member after another. Nothing of the batch was kept; each member answers
    // the 503 of that wait, and its client retries with its Idempotency-Key
    return { rolledBack: false, answer: () => { throw waitedOut; } };
  }
  return { rolledBack: outcome === 'rolled back', answer, batch: scope.batch };
}
