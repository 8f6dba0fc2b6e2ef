import type { TestContext } from './testApp';

// Resources a test needs only to have something real to point at: a body that names a site or an
// asset must name one of the organization's own (docs/architecture.md, "Product rules").

export async function newSite(t: TestContext, auth = t.auth, body: object = { name: 'North substation' }): Promise<{ id: string }> {
  return (await t.http.post('/v1/sites').set('Authorization', auth).send(body).expect(201)).body;
}

export async function newAsset(t: TestContext, auth = t.auth, body: object = { name: 'Transformer T1' }): Promise<{ id: string }> {
  return (await t.http.post('/v1/assets').set('Authorization', auth).send(body).expect(201)).body;
}

/** A run in progress at `siteId` (a new site when not given), of a one-item template. */
export async function newRun(t: TestContext, auth = t.auth, siteId?: string): Promise<{ id: string; siteId: string }> {
  const template = (await t.http.post('/v1/templates').set('Authorization', auth)
    .send({ name: 'Walk-round', items: [{ id: 'ok', label: 'All in order', type: 'yes_no' }] }).expect(201)).body;
  const site = siteId ?? (await newSite(t, auth)).id;
  return (await t.http.post('/v1/runs').set('Authorization', auth).send({ templateId: template.id, siteId: site, userId: 'user-42' }).expect(201)).body;
}
