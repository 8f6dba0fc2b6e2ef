import supertest from 'supertest';
import { loadConfig, ConfigError } from '../runtime/config';
import { createApp } from '../runtime/http/app';
import { describeEachDatabase, anError } from './support/testApp';

const APP = 'https://app.example.com';
const ADMIN = 'https://admin.example.com';
const EVIL = 'https://evil.example.net';

const EXPOSED = ['X-Request-Id', 'Idempotent-Replayed', 'Deprecation', 'Sunset', 'Link', 'Location', 'Retry-After'];

/** Every `access-control-*` header of a response. */
const corsHeaders = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('access-control-')));

describeEachDatabase('CORS for browser clients (CORS_ORIGINS)', (t) => {
  const preflight = (origin: string, method = 'POST') => supertest(t.app.app)
    .options('/v1/sites')
    .set('Origin', origin)
    .set('Access-Control-Request-Method', method)
    .set('Access-Control-Request-Headers', 'authorization,content-type,idempotency-key');

  it('answers the preflight of an allowed origin', async () => {
    const res = await preflight(APP).expect(204);
    expect(corsHeaders(res.headers)).toEqual({
      'access-control-allow-origin': APP,
      'access-control-allow-methods': 'GET,POST,PATCH,PUT,DELETE',
      'access-control-allow-headers': 'Authorization,Content-Type,Idempotency-Key',
      'access-control-max-age': '600',
      'access-control-expose-headers': expect.stringContaining('X-Request-Id'),
    });
    expect(res.headers.vary).toMatch(/Origin/);
    expect(res.headers['x-request-id']).toMatch(/^req_/);
    expect((await preflight(ADMIN, 'PATCH').expect(204)).headers['access-control-allow-origin']).toBe(ADMIN);
  });

  it('lets an allowed origin read the answer and its headers, errors included', async () => {
    const created = await t.http.post('/v1/sites').set('Origin', APP).set('Authorization', t.auth).set('Idempotency-Key', 'cors-1').send({ name: 'Browser site' }).expect(201);
    expect(created.headers['access-control-allow-origin']).toBe(APP);
    const exposed = created.headers['access-control-expose-headers'].split(',');
    expect(exposed).toEqual(expect.arrayContaining(EXPOSED));
    expect(created.headers.vary).toMatch(/Origin/);
    expect(created.headers).not.toHaveProperty('access-control-allow-credentials');

    const denied = await t.http.get('/v1/sites').set('Origin', APP).expect(401);
    expect(denied.body).toEqual(anError('UNAUTHENTICATED'));
    expect(denied.headers['access-control-allow-origin']).toBe(APP);
    expect((await t.http.get('/v1/nowhere').set('Origin', APP).expect(404)).headers['access-control-allow-origin']).toBe(APP);
  });

  it('gives a disallowed origin no CORS header at all', async () => {
    const res = await preflight(EVIL).expect(405);
    expect(corsHeaders(res.headers)).toEqual({});
    const get = await t.http.get('/v1/sites').set('Origin', EVIL).set('Authorization', t.auth).expect(200);
    expect(corsHeaders(get.headers)).toEqual({});
    expect(corsHeaders((await t.http.get('/v1/sites').set('Origin', 'https://app.example.com.evil.net').set('Authorization', t.auth).expect(200)).headers)).toEqual({});
  });

  it('allows no origin by default, and any origin with *', async () => {
    const closed = createApp(loadConfig({ LOG_LEVEL: 'silent' }), { db: t.db.knex, purgeIntervalMs: 0 });
    const res = await supertest(closed.app).options('/v1/sites').set('Origin', APP).set('Access-Control-Request-Method', 'POST').expect(405);
    expect(corsHeaders(res.headers)).toEqual({});
    closed.close();

    const open = createApp(loadConfig({ LOG_LEVEL: 'silent', CORS_ORIGINS: '*' }), { db: t.db.knex, purgeIntervalMs: 0 });
    const any = await supertest(open.app).options('/v1/sites').set('Origin', EVIL).set('Access-Control-Request-Method', 'POST').expect(204);
    expect(any.headers['access-control-allow-origin']).toBe('*');
    open.close();
  });

  it('refuses a malformed CORS_ORIGINS at start', () => {
    expect(() => loadConfig({ CORS_ORIGINS: 'app.example.com' })).toThrow(ConfigError);
    expect(() => loadConfig({ CORS_ORIGINS: 'https://app.example.com/path' })).toThrow(/CORS_ORIGINS/);
  });
}, { CORS_ORIGINS: `${APP}, ${ADMIN}` });
