import { Writable } from 'node:stream';
import OpenAPIBackend from 'openapi-backend';
import pino from 'pino';
import { createApp } from '../runtime/http/app';
import { loadConfig } from '../runtime/config';
import { contractDocument } from '../runtime/http/contractDocuments';
import { precompileRoutes } from '../runtime/http/routeTable';
import { operations } from '../generated/operations';
import { describeEachDatabase, testClient, Method, TEST_ENV } from './support/testApp';

/** Two routers over the contract: the library's own, and the same one with its tables built once. */
function routers() {
  const make = () => {
    const api = new OpenAPIBackend({ definition: structuredClone(contractDocument) as never, validate: false, quick: true, strict: true });
    void api.init();
    return api.router;
  };
  const precompiled = make();
  precompileRoutes(precompiled);
  return { library: make(), precompiled };
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'];
const concrete = (template: string, value: string) => template.replace(/\{[^}]+\}/g, value);

/** The decision of a router: the operationId, or the 404/405 error it throws. */
function decide(router: ReturnType<typeof routers>['library'], method: string, path: string): string {
  try {
    return (router.matchOperation({ method, path, headers: {} }, true) as { operationId: string }).operationId;
  } catch (err) {
    return (err as Error).message;
  }
}

describe('precompiled routes decide exactly as openapi-backend does', () => {
  const { library, precompiled } = routers();
  const paths = [...new Set(Object.values(operations).map((op) => op.path))];
  const samples = [
    ...paths.flatMap((p) => [concrete(p, 'abc_123'), `${concrete(p, 'x')}/`, `/${concrete(p, 'x')}`, `${concrete(p, 'x')}?a=1`, `${concrete(p, 'x')}/extra`, concrete(p, '')]),
    '/', '', 'v1/sites', '/v1', '/v1/', '/v1/nothing', '/v1/sites//', '/V1/SITES', '/v1/sites.json', '/v1/users/%ZZ',
  ];

  it('for every operation of the contract, every method, and paths around them', () => {
    let compared = 0;
    for (const path of samples) {
      for (const method of METHODS) {
        expect([method, path, decide(precompiled, method, path)]).toEqual([method, path, decide(library, method, path)]);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(paths.length * METHODS.length * 6);
  });

  it('routes each operation to its own operationId', () => {
    for (const op of Object.values(operations)) expect(decide(precompiled, op.method, concrete(op.path, 'id_1'))).toBe(op.operationId);
  });

  it('parses the path parameters like the library: percent-decoded, a malformed escape a URIError', () => {
    for (const op of Object.values(operations).filter((o) => o.pathParams.length)) {
      const req = { method: op.method, path: `${concrete(op.path, 'a%20b%2Fc')}/`, headers: {} };
      const expected = library.parseRequest(req, library.matchOperation(req, true)).params;
      expect(precompiled.parseRequest(req, precompiled.matchOperation(req, true)).params).toEqual(expected);
      expect(Object.values(expected)).toEqual(op.pathParams.map(() => 'a b/c'));
    }
    const bad = { method: 'get', path: '/v1/users/%ZZ', headers: {} };
    expect(() => precompiled.parseRequest(bad, precompiled.matchOperation(bad, true))).toThrow(URIError);
  });
});

describeEachDatabase('routing through the app', (t) => {
  it('reaches every operation (the request log names it) before authentication refuses the request', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = createApp(loadConfig(TEST_ENV), { db: t.db.knex, logger: pino({ level: 'info' }, sink), purgeIntervalMs: 0 });
    const http = testClient(app.app);
    try {
      for (const op of Object.values(operations)) {
        const res = await http[op.method as Method](concrete(op.path, 'id_1'));
        expect([op.operationId, res.status]).toEqual([op.operationId, 401]);
      }
    } finally {
      app.close();
    }
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request').map((l) => l.operationId);
    expect(logged).toEqual(Object.values(operations).map((op) => op.operationId));
  });
});
