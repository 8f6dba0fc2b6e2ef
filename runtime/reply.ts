/**
 * What an operation answers: a status, a JSON body (absent for 204) and the headers it sets
 * (Location). Handlers return it, the pipeline sends it, idempotency stores and replays it.
 * The per-operation type in http/handler.ts narrows it to the contract's success responses.
 */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}
