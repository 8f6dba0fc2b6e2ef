import { Knex } from 'knex';
import type { Logger } from 'pino';
import type { operations } from '../../generated/types';
import type { OperationId } from '../../generated/operations';
import type { Principal } from '../auth/apiKeys';
import type { Config } from '../config';
import type { PageRequest } from '../cursor';
import type { Reply } from '../reply';

/**
 * What a handler gets and returns, typed from the contract (generated/types.ts): path and
 * query parameters, the JSON body, and one of the operation's success responses.
 */
type Op<Id extends OperationId> = operations[Id];

type ParamsOf<O, Where extends 'path' | 'query'> = O extends { parameters: { [K in Where]?: infer P } }
  ? [P] extends [undefined | never] ? Record<string, never> : NonNullable<P>
  : Record<string, never>;

type BodyOf<O> = O extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : O extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B | undefined
    : undefined;

type Responses<O> = O extends { responses: infer R } ? R : never;
type SuccessStatus = 200 | 201 | 202 | 204;

/** One of the operation's 2xx responses. Errors are thrown as ApiError, never returned. */
export type OperationReply<O> = {
  [S in keyof Responses<O> & SuccessStatus]: Responses<O>[S] extends { content: { 'application/json': infer B } }
    ? { status: S; body: B; headers?: Record<string, string> }
    : { status: S; body?: undefined; headers?: Record<string, string> };
}[keyof Responses<O> & SuccessStatus];

export interface HandlerInput<Id extends OperationId> {
  operationId: Id;
  path: ParamsOf<Op<Id>, 'path'>;
  query: ParamsOf<Op<Id>, 'query'>;
  /** The body after validation (defaults from the contract filled in). */
  body: BodyOf<Op<Id>>;
  principal: Principal;
  /** Reads: the database. Writes (POST, PATCH, DELETE): the request's transaction, which also stores the idempotent response. */
  db: Knex;
  requestId: string;
  log: Logger;
  /** The server's configuration (settings some operations apply, e.g. webhook target rules). */
  config: Config;
}

/**
 * What a write's `prepare` step gets: the request without its transaction, and `reads`, a handle
 * that reads committed data outside any transaction (storage/committedReads.ts) — for what the
 * step needs to know before it waits on the network, never for a write.
 */
export type PrepareInput<Id extends OperationId> = Omit<HandlerInput<Id>, 'db'> & { reads: Knex };

export type Handler<Id extends OperationId, P = undefined> = (input: HandlerInput<Id> & { prepared: P }) => Promise<OperationReply<Op<Id>>>;

export interface HandlerOptions<Id extends OperationId, P> {
  /**
   * Writes only: work that waits on the network (a DNS lookup, a webhook target's answer) and must therefore run before
   * the write's transaction begins, never inside it — a transaction held open across a lookup
   * holds, on SQLite, the process's shared write batch and the database's write lock, so every
   * other write would wait for the lookup. It runs after the Idempotency-Key's claim (a replay
   * never runs it) and its refusal (an ApiError) is answered, and stored under the key, exactly
   * like the handler's own; the handler gets what it answers as `prepared`. One exception: on
   * Postgres a request with an Idempotency-Key holds its claim in a transaction that is open from
   * the claim to the commit (idempotency/claim.ts), so there `prepare` runs inside that
   * transaction — which holds only the key's lock and one pooled connection, no lock of the
   * organization and nothing other writers wait for.
   */
  prepare: (input: PrepareInput<Id>) => Promise<P>;
}

/** A handler as the runtime sees it, with the types erased. */
export type AnyHandler = ((input: HandlerInput<any> & { prepared: unknown }) => Promise<Reply>) & {
  prepare?: (input: PrepareInput<any>) => Promise<unknown>;
  /** The operation defineHandler was given: checkHandlerRegistry compares it with the one it is registered as. */
  operationId?: string;
};

/**
 * Declares the handler of one operation: `export default defineHandler('createSite', async ({ body }) => …)`;
 * `defineHandler(id, { prepare }, handler)` for a write that needs a step outside its
 * transaction (HandlerOptions; the options come first so that the type of `prepared` is known
 * when the handler is typed).
 */
export function defineHandler<Id extends OperationId>(operationId: Id, handler: Handler<Id>): Handler<Id>;
export function defineHandler<Id extends OperationId, P>(operationId: Id, options: HandlerOptions<Id, P>, handler: Handler<Id, NoInfer<P>>): Handler<Id, P>;
export function defineHandler<Id extends OperationId, P>(
  operationId: Id,
  ...args: [handler: Handler<Id, P>] | [options: HandlerOptions<Id, P>, handler: Handler<Id, P>]
): Handler<Id, P> {
  if (args.length === 1) return Object.assign(args[0], { operationId });
  const [options, handler] = args;
  return Object.assign(handler, { operationId, prepare: options.prepare });
}

/**
 * Refuses a registry (generated/handlers.ts: `handlers/<operationId>.ts` for each operation) in
 * which a handler was defined for another operation than the one it is registered as — a copied
 * handler file whose `defineHandler` id was left as it was. Its request and response would be
 * typed from the other operation, and nothing else would notice until a test called it.
 */
export function checkHandlerRegistry(registry: Record<string, AnyHandler>): void {
  const wrong = Object.entries(registry).filter(([id, handler]) => handler.operationId !== id);
  if (wrong.length) {
    throw new Error(wrong.map(([id, handler]) => `handlers/${id}.ts defines defineHandler('${handler.operationId ?? '?'}', …): it must name '${id}', the operation it serves`).join('\n'));
  }
}

/**
 * The page a list operation asks for. `limit` is always present after validation (the
 * contract's `Limit` parameter has `default: 50`, filled in by the generated validator);
 * its type stays optional because the contract types the request as the caller sends it.
 */
export function pageOf(query: { limit?: number; cursor?: string }): PageRequest {
  if (query.limit === undefined) throw new Error('limit missing after validation: the Limit parameter lost its default');
  return { limit: query.limit, cursor: query.cursor };
}

/**
 * A list's filters: its query parameters but paging, as the contract types them (the shape
 * storage/listFilters.ts gives repositories). Handed on whole rather than field by field, so
 * that a filter added to the contract reaches the repository without an edit here, where
 * forgetting it would silently answer the list unfiltered. The validated query holds only the
 * contract's parameters (unknown ones are refused with 400).
 */
export function filtersOf<Q extends { limit?: number; cursor?: string }>(query: Q): Omit<Q, 'limit' | 'cursor'> {
  const { limit: _limit, cursor: _cursor, ...filters } = query;
  return filters;
}
