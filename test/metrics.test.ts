import { describeEachDatabase } from './support/testApp';

describeEachDatabase('GET /metrics', (t) => {
  it('Prometheus text: requests by operation and status, duration, in flight, replays, idempotency 409s, database pool', async () => {
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'metrics-1').send({ name: 'Metered' }).expect(201);
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'metrics-1').send({ name: 'Metered' }).expect(201);
    await t.http.post('/v1/sites').set('Authorization', t.auth).set('Idempotency-Key', 'metrics-1').send({ name: 'Other' }).expect(409);
    const res = await t.http.get('/metrics').expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = res.text;
    expect(text).toMatch(/^http_requests_total\{operation="createSite",status="201"\} [2-9]\d*$/m);
    expect(text).toMatch(/^http_requests_total\{operation="createSite",status="409"\} [1-9]\d*$/m);
    expect(text).toMatch(/^http_request_duration_seconds_bucket\{le="0\.1",operation="createSite",status="201"\} \d+$/m);
    expect(text).toMatch(/^http_requests_in_flight \d+$/m);
    expect(text).toMatch(/^idempotent_replays_total [1-9]\d*$/m);
    expect(text).toMatch(/^idempotency_conflicts_total\{code="IDEMPOTENCY_KEY_REUSED"\} [1-9]\d*$/m);
    expect(text).toMatch(/^# TYPE rate_limited_requests_total counter$/m);
    expect(text).toMatch(/^db_pool_connections\{state="max"\} \d+$/m);
    expect(text).toMatch(/^process_cpu_seconds_total /m);
  });

  it('needs the METRICS_TOKEN as a bearer token when it is set', async () => {
    const guarded = t.anotherApp({ METRICS_TOKEN: 'scrape-secret' });
    const refused = await guarded.http.get('/metrics').expect(401);
    expect(refused.body.code).toBe('UNAUTHENTICATED');
    await guarded.http.get('/metrics').set('Authorization', 'Bearer wrong').expect(401);
    const ok = await guarded.http.get('/metrics').set('Authorization', 'Bearer scrape-secret').expect(200);
    expect(ok.text).toMatch(/^# TYPE http_requests_total counter$/m);
  });
});
