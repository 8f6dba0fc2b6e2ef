import OpenAPIBackend from 'openapi-backend';
import type { Response } from 'superagent';
import { operations, OperationId } from '../../generated/operations';
import { validators } from '../../generated/validators';
import openapi from '../../generated/openapi.json';

/**
 * Every response a test receives through `testClient` is checked against the contract after
 * the test (test/support/setup.ts): the status is declared for the operation, the body is
 * valid against that response's schema, and the declared headers are present. A response
 * the contract does not describe fails the test that received it.
 */
interface Recorded {
  method: string;
  url: string;
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

const recorded: Recorded[] = [];

const router = new OpenAPIBackend({ definition: structuredClone(openapi) as never, validate: false, quick: true });
void router.init();

export function recordResponse(method: string, url: string, res: Response): void {
  recorded.push({ method, url, status: res.status, headers: res.headers as Record<string, string>, body: res.body });
}

/** Problems with the responses recorded since the last call (and forgets them). */
export function takeContractViolations(): string[] {
  const problems = recorded.flatMap(check);
  recorded.length = 0;
  return problems;
}

const PUBLIC = /^\/(healthz|openapi\.json|openapi-sdk\.json|docs)/;

function check(r: Recorded): string[] {
  const where = `${r.method.toUpperCase()} ${r.url} → ${r.status}`;
  const path = r.url.split('?')[0];
  const problems: string[] = [];
  if (!r.headers['x-request-id']) problems.push(`${where}: no X-Request-Id header`);
  if (PUBLIC.test(path)) return problems;
  const op = router.router.matchOperation({ method: r.method, path, headers: {} });
  if (!op) {
    // no operation: only the router's own answers are allowed
    if (![404, 405].includes(r.status)) problems.push(`${where}: no operation matches and the status is not 404/405`);
    if (!validators.getSite.responses['404']!(r.body)) problems.push(`${where}: body is not an Error`);
    return problems;
  }
  const info = operations[op.operationId as OperationId];
  const declared = validators[info.operationId].responses;
  if (!(String(r.status) in declared)) {
    return [...problems, `${where}: status ${r.status} is not declared for ${info.operationId} (declared: ${Object.keys(declared).join(', ')})`];
  }
  const validate = declared[String(r.status)];
  if (validate && !validate(r.body)) {
    problems.push(`${where}: body does not match the ${info.operationId} ${r.status} schema: ${JSON.stringify(validate.errors?.slice(0, 3))}`);
  }
  if (!validate && r.body && Object.keys(r.body as object).length) problems.push(`${where}: has a body, the contract declares none`);
  const response = (openapi as any).paths[info.path][info.method].responses[String(r.status)];
  const headers = response.$ref ? resolve(response.$ref).headers : response.headers;
  for (const name of Object.keys(headers ?? {})) {
    const required = name === 'Location' || name === 'X-Request-Id' || name === 'WWW-Authenticate';
    if (required && !r.headers[name.toLowerCase()]) problems.push(`${where}: declared header ${name} is missing`);
  }
  return problems;
}

function resolve(ref: string): any {
  return ref.slice(2).split('/').reduce((node: any, key) => node[key], openapi);
}
