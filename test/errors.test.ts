import http from 'node:http';
import net from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createApp } from '../runtime/http/app';
import { loadConfig } from '../runtime/config';
import { describeEachDatabase, anError, aRequestId, testClient, TEST_ENV } from './support/testApp';
import { MAX_ERROR_DETAILS } from '../runtime/http/validation';
import { notImplemented } from '../runtime/errors';
import { renderHandlerStub } from '../scripts/contract/operations';

// The errors of docs/architecture.md ("Statuses, errors and versions") that do not depend on a resource, through the real app.
describeEachDatabase('errors', (t) => {
  it('400 INVALID_JSON for a body that is not JSON', async () => {
    const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'application/json').send('{"name":').expect(400);
    expect(res.body).toEqual(anError('INVALID_JSON'));
  });

  it('400 VALIDATION_ERROR names each problem, capped in number', async () => {
    const res = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: '', latitude: 'north', longitude: 500 }).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', {
      details: [
        { path: '/name', message: 'must NOT have fewer than 1 characters' },
        { path: '/latitude', message: 'must be number' },
        { path: '/longitude', message: 'must be <= 180' },
      ],
    }));
    const many = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`unknown${i}`, i]));
    const capped = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'x', ...many }).expect(400);
    expect(capped.body.details).toHaveLength(MAX_ERROR_DETAILS);
    expect(capped.body.error).toBe(`/unknown0: is not a known field (and ${MAX_ERROR_DETAILS - 1} more)`);
  });

  it('400 VALIDATION_ERROR for a missing body and for a body of the wrong type', async () => {
    const missing = await t.http.post('/v1/sites').set('Authorization', t.auth).expect(400);
    expect(missing.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '', message: 'is required' }] }));
    const array = await t.http.post('/v1/sites').set('Authorization', t.auth).send([1, 2]).expect(400);
    expect(array.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '', message: 'must be object' }] }));
  });

  it('400 VALIDATION_ERROR for a malformed path parameter', async () => {
    const res = await t.http.get('/v1/sites/not%20an%20id').set('Authorization', t.auth).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/path/id', message: expect.stringContaining('pattern') }] }));
  });

  describe('401 UNAUTHENTICATED with WWW-Authenticate: Bearer', () => {
    it.each([
      ['no header', undefined],
      ['another scheme', 'Basic dXNlcjpwYXNz'],
      ['a malformed bearer', 'Bearer not a key'],
      ['an unknown key', 'Bearer fop_0000000000000000000000000000000000000000000'],
    ])('%s', async (_name, header) => {
      const req = t.http.get('/v1/sites');
      if (header) req.set('Authorization', header);
      const res = await req.expect(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect(res.body).toEqual(anError('UNAUTHENTICATED'));
    });

    it('a revoked key is refused from the next request on', async () => {
      const auth = await t.newKey({ organization: 'revoking' });
      await t.http.get('/v1/sites').set('Authorization', auth).expect(200);
      const secret = auth.slice('Bearer '.length);
      const { createHash } = await import('node:crypto');
      const row = await t.db.knex('api_keys').where({ secret_hash: createHash('sha256').update(secret).digest('hex') }).first();
      const { revokeApiKey } = await import('../runtime/auth/apiKeys');
      expect(await revokeApiKey(t.db.knex, row.id)).toBe(true);
      const res = await t.http.get('/v1/sites').set('Authorization', auth).expect(401);
      expect(res.body).toEqual(anError('UNAUTHENTICATED', { error: 'This API key has been revoked' }));
    });
  });

  it('403 INSUFFICIENT_SCOPE names the scope the contract requires', async () => {
    const readOnly = await t.newKey({ scopes: ['sites:read'] });
    const res = await t.http.post('/v1/sites').set('Authorization', readOnly).send({ name: 'x' }).expect(403);
    expect(res.headers['www-authenticate']).toBe('Bearer error="insufficient_scope", scope="sites:write"');
    expect(res.body).toEqual(anError('INSUFFICIENT_SCOPE'));
    await t.http.get('/v1/sites').set('Authorization', readOnly).expect(200);
  });

  it('404 NOT_FOUND for an unknown path and for any other version than /v1', async () => {
    for (const path of ['/v1/nothing-here', '/v2/sites', '/sites', '/']) {
      const res = await t.http.get(path).set('Authorization', t.auth).expect(404);
      expect(res.body).toEqual(anError('NOT_FOUND'));
    }
  });

  it('405 METHOD_NOT_ALLOWED with Allow for a known path', async () => {
    const res = await t.http.put('/v1/sites').set('Authorization', t.auth).send({}).expect(405);
    expect(res.headers.allow).toBe('GET, POST');
    expect(res.body).toEqual(anError('METHOD_NOT_ALLOWED'));
  });

  it('415 UNSUPPORTED_MEDIA_TYPE for a body that is not application/json', async () => {
    const res = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', 'text/plain').send('name=x').expect(415);
    expect(res.body).toEqual(anError('UNSUPPORTED_MEDIA_TYPE'));
    // another JSON-based format is not a plain body either (a JSON Patch array, a merge patch)
    for (const type of ['application/json-patch+json', 'application/merge-patch+json', 'application/vnd.example+json']) {
      const other = await t.http.post('/v1/sites').set('Authorization', t.auth).set('Content-Type', type).send('{"name":"x"}').expect(415);
      expect({ type, body: other.body }).toEqual({ type, body: anError('UNSUPPORTED_MEDIA_TYPE') });
    }
  });

  it('auth is checked before the body is read', async () => {
    const res = await t.http.post('/v1/sites').set('Content-Type', 'text/plain').send('x').expect(401);
    expect(res.body.code).toBe('UNAUTHENTICATED');
  });

  it('X-Request-Id on every response, matching the error body', async () => {
    const ok = await t.http.get('/healthz').expect(200);
    expect(ok.headers['x-request-id']).toEqual(aRequestId());
    const err = await t.http.get('/v1/sites').expect(401);
    expect(err.body.requestId).toBe(err.headers['x-request-id']);
  });

  it('500 INTERNAL without stack or SQL when the database fails, logged with the request id', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = createApp(loadConfig(TEST_ENV), { db: t.db.knex, logger: pino({ level: 'info' }, sink), purgeIntervalMs: 0 });
    const http = testClient(app.app);
    await t.db.knex.schema.renameTable('sites', 'sites_moved_away');
    try {
      const res = await http.get('/v1/sites').set('Authorization', t.auth).expect(500);
      expect(res.body).toEqual({ error: 'Internal server error', code: 'INTERNAL', requestId: aRequestId() });
      expect(JSON.stringify(res.body)).not.toMatch(/sites_moved_away|select|at /i);
      const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'request failed');
      expect(logged).toMatchObject({ requestId: res.body.requestId, err: { message: expect.stringContaining('sites') } });
    } finally {
      await t.db.knex.schema.renameTable('sites_moved_away', 'sites');
      app.close();
    }
  });

  it('one structured log line per request, with the key and organization ids, the rate-limit outcome and never the secret', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = createApp(loadConfig(TEST_ENV), { db: t.db.knex, logger: pino({ level: 'info' }, sink), purgeIntervalMs: 0 });
    const res = await testClient(app.app).get('/v1/sites?limit=2').set('Authorization', t.auth).expect(200);
    app.close();
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    expect(requests).toEqual([expect.objectContaining({
      requestId: res.headers['x-request-id'], method: 'GET', route: '/v1/sites', operationId: 'listSites', status: 200,
      durationMs: expect.any(Number), ip: expect.stringMatching(/127\.0\.0\.1$/), apiKeyId: expect.stringMatching(/^key_/),
      organizationId: expect.stringMatching(/^org_/), rateLimit: 'allowed',
    })]);
    expect(lines.join('')).not.toContain(t.auth.slice('Bearer '.length));
  });

  it('logs the error answer\'s code, and what a proxy in front called the request (its X-Request-Id, the traceparent\'s trace id) beside the server\'s own id', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = createApp(loadConfig(TEST_ENV), { db: t.db.knex, logger: pino({ level: 'info' }, sink), purgeIntervalMs: 0 });
    const http = testClient(app.app);
    const refused = await http.get('/v1/sites').set('Authorization', 'Bearer fop_nobody').set('X-Request-Id', 'gw-7f3a/42')
      .set('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01').expect(401);
    const fine = await http.get('/v1/sites').set('Authorization', t.auth).set('X-Request-Id', 'has a space').set('traceparent', 'garbage').expect(200);
    app.close();
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    expect(requests[0]).toMatchObject({ requestId: refused.body.requestId, status: 401, code: 'UNAUTHENTICATED', upstreamRequestId: 'gw-7f3a/42', traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    expect(refused.headers['x-request-id']).toBe(refused.body.requestId); // the server's own id is the one answered
    expect(requests[1]).toMatchObject({ requestId: fine.headers['x-request-id'], status: 200 });
    expect(requests[1]).not.toHaveProperty('code');
    expect(requests[1]).not.toHaveProperty('upstreamRequestId'); // not an id a proxy would send
    expect(requests[1]).not.toHaveProperty('traceId');
  });
});

describeEachDatabase('a request the client abandons', (t) => {
  it('is logged as aborted (no status) and counted as aborted, never as the 200 it did not get', async () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    const app = createApp(loadConfig(TEST_ENV), { db: t.db.knex, logger: pino({ level: 'info' }, sink), purgeIntervalMs: 0 });
    const server = http.createServer(app.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as net.AddressInfo;
      const metric = async () => {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return Number(/^http_requests_total\{operation="createSite",status="aborted"\} (\d+)$/m.exec(text)?.[1] ?? 0);
      };
      const before = await metric();
      // half a body, then the client goes away
      const socket = net.connect(port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(`POST /v1/sites HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.auth}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"ha`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      socket.destroy();
      let logged: any;
      for (let i = 0; i < 50 && !logged; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'request' && l.aborted);
      }
      expect(logged).toMatchObject({ method: 'POST', operationId: 'createSite', status: null, aborted: true, requestId: expect.stringMatching(/^req_/) });
      expect(await metric()).toBe(before + 1);
    } finally {
      server.close();
      app.close();
    }
  });
});

describeEachDatabase('413 PAYLOAD_TOO_LARGE', (t) => {
  it('answers 413 over MAX_BODY_BYTES, with the error body', async () => {
    const res = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'x'.repeat(2000) }).expect(413);
    expect(res.body).toEqual(anError('PAYLOAD_TOO_LARGE', { error: 'Request body is larger than 1024 bytes' }));
    await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'small' }).expect(201);
  });
}, { MAX_BODY_BYTES: '1024' });

describeEachDatabase('public routes', (t) => {
  it('GET /healthz answers while the process lives; GET /readyz checks the database and its migrations', async () => {
    expect((await t.http.get('/healthz').expect(200)).body).toEqual({ status: 'ok' });
    expect((await t.http.get('/readyz').expect(200)).body).toEqual({ status: 'ok', database: 'ok', migrations: 'current' });

    // a database without the newest migration this code expects is not ready: 503, naming it
    const newest = await t.db.knex('knex_migrations').orderBy('id', 'desc').first();
    await t.db.knex('knex_migrations').where({ id: newest.id }).delete();
    try {
      const res = await t.http.get('/readyz').expect(503);
      expect(res.body).toEqual(anError('SERVICE_UNAVAILABLE'));
      expect(res.body.error).toContain(newest.name.replace(/\.(ts|js)$/, ''));
      expect(res.headers['retry-after']).toBe('5');
      expect((await t.http.get('/healthz').expect(200)).body).toEqual({ status: 'ok' }); // alive all the same
    } finally {
      await t.db.knex('knex_migrations').insert(newest);
    }
    await t.http.get('/readyz').expect(200);
  });

  it('serves both contract documents without a key', async () => {
    const canonical = await t.http.get('/openapi.json').expect(200);
    expect(canonical.body).toMatchObject({ openapi: '3.1.0', info: { version: '1.0.0' } });
    const sdk = await t.http.get('/openapi-sdk.json').expect(200);
    expect(sdk.body.openapi).toBe('3.0.3');
    expect(Object.keys(sdk.body.paths)).toEqual(Object.keys(canonical.body.paths));
  });

  it('serves the reference page and its assets locally', async () => {
    const page = await t.http.get('/docs').expect(200);
    expect(page.text).toContain('/docs/assets/swagger-ui-bundle.js');
    expect(page.text).not.toMatch(/https?:\/\//);
    await t.http.get('/docs/assets/swagger-ui-bundle.js').expect(200);
  });

  it('serves an icon for the page and for a browser asking for /favicon.ico, so no 404 is logged', async () => {
    const page = await t.http.get('/docs').expect(200);
    expect(page.text).toContain('<link rel="icon" type="image/png" sizes="32x32" href="/docs/assets/favicon-32x32.png">');
    await t.http.get('/docs/assets/favicon-32x32.png').expect(200).expect('Content-Type', 'image/png');
    const icon = await t.http.get('/favicon.ico').expect(200).expect('Content-Type', 'image/png');
    expect(icon.body.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  });
});

describe('501 NOT_IMPLEMENTED: the stub npm run generate writes for an operation without a handler', () => {
  it('throws notImplemented naming its operation, which answers 501 with that code', () => {
    const stub = renderHandlerStub('getWidget');
    expect(stub).toContain("defineHandler('getWidget'");
    expect(stub).toContain("throw notImplemented('getWidget')");
    const err = notImplemented('getWidget');
    expect(err).toMatchObject({ status: 501, code: 'NOT_IMPLEMENTED', message: expect.stringContaining('getWidget') });
  });
});
