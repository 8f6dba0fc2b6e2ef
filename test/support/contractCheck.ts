import OpenAPIBackend, { Document } from 'openapi-backend';
import Ajv2020 from 'ajv/dist/2020';
import type { ValidateFunction } from 'ajv';
import type { Response } from 'superagent';
import { operations, OperationId, OperationInfo } from '../../generated/operations';
import { validators } from '../../generated/validators';
import openapi from '../../generated/openapi.json';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const sharedResponseValidators: Record<string, ValidateFunction> = require('../../generated/validators/responses.js');

/**
 * Every response a test receives through `testClient` (or hands to `recordExchange`, as the SDK
 * tests do from their fetch) is checked against the contract after the test
 * (test/support/setup.ts): the status is declared for the operation, the body is valid
 * against that response's schema (the generated 2020-12 response validators), the declared
 * headers are present and match their schemas. A response the contract does not describe
 * fails the test that received it.
 */
export interface RecordedExchange {
  method: string;
  /** Path and query as requested (`/v1/sites?limit=3`); an absolute URL is accepted too. */
  url: string;
  status: number;
  /** Header names in lower case, as node and fetch give them. */
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body; `undefined` or `{}` when there is none. */
  body: unknown;
}

const recorded: RecordedExchange[] = [];

const router = new OpenAPIBackend({ definition: structuredClone(openapi) as unknown as Document, validate: false, quick: true });
void router.init();

export function recordExchange(exchange: RecordedExchange): void {
  recorded.push(exchange);
}

// a response reaches recordResponse twice when testClient and the global supertest hook
// (setup.ts) both see it
const alreadyRecorded = new WeakSet<object>();

export function recordResponse(method: string, url: string, res: Response): void {
  if (alreadyRecorded.has(res)) return;
  alreadyRecorded.add(res);
  recordExchange({ method, url, status: res.status, headers: res.headers as RecordedExchange['headers'], body: res.body });
}

/** Problems with the responses recorded since the last call (and forgets them). */
export function takeContractViolations(): string[] {
  const problems = recorded.flatMap(checkExchange);
  recorded.length = 0;
  return problems;
}

const PUBLIC = /^\/(healthz|readyz|metrics|openapi\.json|openapi-sdk\.json|docs|favicon\.ico)(\/|$)/;

/**
 * Headers the server sends on every answer that declares them. The others a contract
 * declares are conditional (Idempotent-Replayed only on a replay, Deprecation only on a
 * deprecated operation), so they are required only when the contract says `required: true`;
 * when present they must match their schema either way.
 */
const ALWAYS_SENT = new Set(['x-request-id', 'location', 'www-authenticate', 'allow', 'retry-after', 'ratelimit-policy', 'ratelimit']);

/** The contract's verdict on one recorded response: an empty list when it is faithful. */
export function checkExchange(r: RecordedExchange): string[] {
  const path = pathOf(r.url);
  const where = `${r.method.toUpperCase()} ${path} → ${r.status}`;
  const problems: string[] = [];
  const header = (name: string) => headerValue(r.headers, name);
  if (!header('x-request-id')) problems.push(`${where}: no X-Request-Id header`);
  if (PUBLIC.test(path)) return problems;

  // a CORS preflight is answered before routing (app.ts) and is not an operation of the contract
  if (r.method.toUpperCase() === 'OPTIONS' && r.status === 204 && header('access-control-allow-origin')) return problems;

  // HEAD is answered as GET without a body (app.ts): same operation, same statuses
  const isHead = r.method.toUpperCase() === 'HEAD';
  // a path that cannot be percent-decoded reaches no operation: the server refuses it (400) before routing
  const decodable = (() => { try { decodeURIComponent(path); return true; } catch { return false; } })();
  const match = decodable ? router.router.matchOperation({ method: isHead ? 'get' : r.method.toLowerCase(), path, headers: {} }) : undefined;
  if (!match) {
    // no operation: only the router's own answers (unknown path, method not offered, undecodable path) are allowed
    if (![404, 405].includes(r.status) && !(r.status === 400 && !decodable)) problems.push(`${where}: no operation matches and the status is not 404/405`);
    if (!sharedResponseValidators.Error(r.body)) problems.push(`${where}: body is not an Error`);
    if (r.status === 405 && !header('allow')) problems.push(`${where}: 405 without an Allow header`);
    return problems;
  }

  const info: OperationInfo = operations[match.operationId as OperationId];
  const declared = validators[info.operationId].responses;
  const status = String(r.status);
  if (!(status in declared)) {
    return [...problems, `${where}: status ${status} is not declared for ${info.operationId} (declared: ${Object.keys(declared).join(', ')})`];
  }
  if (isHead) return problems;
  const validate = declared[status];
  const hasBody = r.body !== undefined && r.body !== '' && !(isPlainObject(r.body) && Object.keys(r.body).length === 0 && !header('content-type'));
  if (validate) {
    if (!/^application\/json\b/.test(header('content-type') ?? '')) problems.push(`${where}: Content-Type is ${header('content-type') ?? 'missing'}, the contract declares application/json`);
    if (!validate(r.body)) problems.push(`${where}: body does not match the ${info.operationId} ${status} schema: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
  } else if (hasBody) {
    problems.push(`${where}: has a body, the contract declares none`);
  }

  const response = deref((openapi as any).paths[info.path][info.method].responses[status]);
  for (const [name, declaration] of Object.entries<any>(response.headers ?? {})) {
    const spec = deref(declaration);
    const value = header(name);
    if (value === undefined) {
      if (spec.required === true || ALWAYS_SENT.has(name.toLowerCase())) problems.push(`${where}: declared header ${name} is missing`);
      continue;
    }
    const check = spec.schema ? headerSchemaValidator(spec.schema) : undefined;
    if (check && !check(value)) problems.push(`${where}: header ${name}: ${JSON.stringify(value)} does not match its schema`);
  }
  return problems;
}

function pathOf(url: string): string {
  const withoutOrigin = /^https?:\/\//.test(url) ? new URL(url).pathname : url.split('?')[0];
  return withoutOrigin.split('#')[0];
}

function headerValue(headers: RecordedExchange['headers'], name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function deref(node: any): any {
  while (node && typeof node.$ref === 'string') {
    node = node.$ref.slice(2).split('/').reduce((n: any, key: string) => n[key.replace(/~1/g, '/').replace(/~0/g, '~')], openapi);
  }
  return node;
}

// Header schemas are few and simple (strings, enums); they compile here, once each, rather
// than in generated/ which only holds what the server itself needs.
const headerAjv = new Ajv2020({ strict: false, coerceTypes: true }); // header values arrive as strings
const headerValidators = new Map<object, ValidateFunction>();
function headerSchemaValidator(schema: object): ValidateFunction {
  let validate = headerValidators.get(schema);
  if (!validate) {
    validate = headerAjv.compile(schema);
    headerValidators.set(schema, validate);
  }
  return validate;
}
