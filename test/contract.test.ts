import Ajv2020 from 'ajv/dist/2020';
import express from 'express';
import supertest from 'supertest';
import addFormats from 'ajv-formats';
import openapi from '../generated/openapi.json';
import { operations } from '../generated/operations';
import { checkExchange, recordExchange, takeContractViolations, RecordedExchange } from './support/contractCheck';

const site = {
  id: 'site_8f3k2m9q4t7w1x5z6c0v2b8n', name: 'North Substation', address: null, latitude: null, longitude: null,
  geofenceRadiusMeters: 100, timezone: null, createdAt: '2026-11-22T04:19:50.123Z', updatedAt: '2026-11-22T04:19:50.123Z',
};
const rateLimit = { 'ratelimit-policy': '"per-key";q=600;w=60', ratelimit: '"per-key";r=599;t=42' };
const json = { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'req_00000000000000000000', ...rateLimit };
const exchange = (over: Partial<RecordedExchange>): RecordedExchange => ({
  method: 'get', url: `/v1/sites/${site.id}`, status: 200, headers: json, body: site, ...over,
});

describe('the contract check every test response goes through (test/support/contractCheck.ts)', () => {
  it('accepts a faithful response', () => {
    expect(checkExchange(exchange({}))).toEqual([]);
    expect(checkExchange(exchange({ method: 'post', url: '/v1/sites', status: 201, headers: { ...json, location: `/v1/sites/${site.id}` } }))).toEqual([]);
    expect(checkExchange(exchange({ method: 'delete', status: 204, headers: { 'x-request-id': 'req_1', ...rateLimit }, body: {} }))).toEqual([]);
    expect(checkExchange(exchange({ url: '/v2/sites', status: 404, body: { error: 'No route', code: 'NOT_FOUND', requestId: 'req_1' } }))).toEqual([]);
  });

  it('fails a status the operation does not declare', () => {
    expect(checkExchange(exchange({ status: 418 }))).toEqual([expect.stringContaining('status 418 is not declared for getSite')]);
    expect(checkExchange(exchange({ status: 501, body: { error: 'x', code: 'NOT_IMPLEMENTED', requestId: 'r' } }))).toEqual([
      expect.stringContaining('status 501 is not declared'),
    ]);
  });

  it('fails a body that does not match the schema of its status', () => {
    expect(checkExchange(exchange({ body: { ...site, geofenceRadiusMeters: 'wide' } }))).toEqual([expect.stringContaining('body does not match the getSite 200 schema')]);
    const { createdAt: _dropped, ...withoutCreatedAt } = site;
    expect(checkExchange(exchange({ body: withoutCreatedAt }))).toEqual([expect.stringContaining("must have required property 'createdAt'")]);
    expect(checkExchange(exchange({ status: 404, body: { message: 'not found' } }))).toEqual([expect.stringContaining('getSite 404 schema')]);
    expect(checkExchange(exchange({ method: 'delete', status: 204, body: { deleted: true } }))).toEqual([expect.stringContaining('has a body, the contract declares none')]);
    expect(checkExchange(exchange({ headers: { 'x-request-id': 'r', 'content-type': 'text/html', ...rateLimit } }))).toEqual([expect.stringContaining('Content-Type is text/html')]);
  });

  it('fails a missing declared header', () => {
    expect(checkExchange(exchange({ method: 'post', url: '/v1/sites', status: 201 }))).toEqual([expect.stringContaining('declared header Location is missing')]);
    expect(checkExchange(exchange({ headers: { 'content-type': 'application/json' } }))).toEqual([
      expect.stringContaining('no X-Request-Id header'),
      expect.stringContaining('declared header X-Request-Id is missing'),
      expect.stringContaining('declared header RateLimit-Policy is missing'),
      expect.stringContaining('declared header RateLimit is missing'),
    ]);
  });

  it('fails answers of the router that are not errors, and statuses other than 404/405 on unknown paths', () => {
    expect(checkExchange(exchange({ url: '/v1/nowhere', status: 404, body: 'Not Found' }))).toEqual([expect.stringContaining('body is not an Error')]);
    expect(checkExchange(exchange({ url: '/v1/nowhere', status: 200, body: { error: 'x', code: 'NOT_FOUND', requestId: 'r' } }))).toEqual([
      expect.stringContaining('status is not 404/405'),
    ]);
  });

  it('also sees responses a test receives with supertest directly, not through testClient', async () => {
    const rogue = express().get('/v1/sites/:id', (_req, res) => { res.status(418).json({ teapot: true }); });
    await supertest(rogue).get(`/v1/sites/${site.id}`).expect(418);
    expect(takeContractViolations()).toEqual([
      expect.stringContaining('no X-Request-Id header'),
      expect.stringContaining('status 418 is not declared for getSite'),
    ]);
  });

  it('is what fails a test: recorded problems come back from takeContractViolations once', () => {
    recordExchange(exchange({ status: 418 }));
    expect(takeContractViolations()).toHaveLength(1);
    expect(takeContractViolations()).toEqual([]);
  });
});

/**
 * Every example in the contract validates against its schema: media-type and parameter
 * `example`/`examples` (requests, responses, headers) and schema-level `examples`. A wrong
 * example misleads every reader of /docs and every generated SDK's documentation.
 */
describe('examples in the contract', () => {
  const doc = openapi as any;

  it('has an example for the success answer of every operation (docs/architecture.md, "Statuses, errors and versions")', () => {
    const missing = Object.values(operations).filter((op) => {
      const responses = doc.paths[op.path][op.method].responses;
      const success = Object.keys(responses).find((s) => s.startsWith('2'))!;
      const media = resolvePointer(doc, responses[success])?.content?.['application/json'];
      if (!media) return false; // 204: nothing to show
      const schema = resolvePointer(doc, media.schema);
      return !('example' in media) && !media.examples && !schema?.examples && !('example' in (schema ?? {}));
    });
    expect(missing.map((op) => op.operationId)).toEqual([]);
  });

  it('validates each example against its schema: requests, responses, parameters, headers, schemas', () => {
    const { checked, problems } = invalidExamples(doc);
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(Object.keys(operations).length);
  });

  it('would catch a wrong example in each of those places', () => {
    const broken = structuredClone(doc);
    const createSite = broken.paths['/v1/sites'].post;
    createSite.requestBody.content['application/json'].example = { name: 'X', latitude: 1 }; // dependentRequired (2020-12)
    createSite.responses['201'].content['application/json'].example.createdAt = 'yesterday';
    broken.components.parameters.Limit.example = 501;
    broken.components.headers.IdempotentReplayed.example = 'false';
    broken.components.schemas.Error.examples[0].code = 'OOPS';
    broken.components.schemas.Timestamp.examples.push('tomorrow');
    const { problems } = invalidExamples(broken);
    expect(problems).toEqual([
      '/components/parameters/Limit/example: example must be <= 500',
      '/components/headers/IdempotentReplayed/example: example must be equal to one of the allowed values',
      '/components/schemas/Timestamp/examples/1: example must match format "date-time"',
      '/components/schemas/Error/examples/0: example/code must be equal to one of the allowed values',
      '/paths/~1v1~1sites/post/requestBody/content/application~1json/example: example must have property longitude when property latitude is present',
      '/paths/~1v1~1sites/post/responses/201/content/application~1json/example: example/createdAt must match format "date-time"',
    ]);
  });
});

/** Validates every example of `doc` against its schema (JSON Schema 2020-12, formats checked). */
function invalidExamples(doc: any): { checked: number; problems: string[] } {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  // the whole document is one schema resource, so `#/components/schemas/X` refs resolve in it
  ajv.addSchema(doc, 'openapi');
  const found = collectExamples(doc);
  const problems: string[] = [];
  for (const example of found) {
    const validate = ajv.compile({ $ref: `openapi#${example.schemaPointer}` });
    if (!validate(structuredClone(example.value))) problems.push(`${example.where}: ${ajv.errorsText(validate.errors, { dataVar: 'example' })}`);
  }
  return { checked: found.length, problems };
}

interface FoundExample {
  /** JSON Pointer of the example, for the failure message. */
  where: string;
  /** JSON Pointer of the schema it must satisfy. */
  schemaPointer: string;
  value: unknown;
}

/** Follows `$ref`s (within the document) until a node that is not one. */
function resolvePointer(doc: any, node: any): any {
  while (node && typeof node.$ref === 'string') {
    node = node.$ref.slice(2).split('/').reduce((n: any, k: string) => n?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return node;
}

// Keys under which a schema holds other schemas: single, lists, and maps from a name.
const SUBSCHEMA = new Set(['items', 'not', 'additionalProperties', 'contains', 'if', 'then', 'else', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties', 'contentSchema']);
const SUBSCHEMA_LISTS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);
const SUBSCHEMA_MAPS = new Set(['properties', '$defs', 'patternProperties', 'dependentSchemas']);

/** Every example in the document with the schema it illustrates. */
function collectExamples(doc: any): FoundExample[] {
  const out: FoundExample[] = [];
  const pointer = (parts: string[]) => parts.map((p) => '/' + p.replace(/~/g, '~0').replace(/\//g, '~1')).join('');

  const visitSchema = (schema: any, parts: string[]): void => {
    if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return;
    if (Array.isArray(schema.examples)) {
      schema.examples.forEach((value: unknown, i: number) => out.push({ where: pointer([...parts, 'examples', String(i)]), schemaPointer: pointer(parts), value }));
    }
    if ('example' in schema) out.push({ where: pointer([...parts, 'example']), schemaPointer: pointer(parts), value: schema.example });
    for (const [key, child] of Object.entries<any>(schema)) {
      if (SUBSCHEMA.has(key)) visitSchema(child, [...parts, key]);
      else if (SUBSCHEMA_LISTS.has(key) && Array.isArray(child)) child.forEach((s, i) => visitSchema(s, [...parts, key, String(i)]));
      else if (SUBSCHEMA_MAPS.has(key) && child && typeof child === 'object') for (const [name, s] of Object.entries(child)) visitSchema(s, [...parts, key, name]);
    }
  };

  // media types, parameters and headers: an object with a `schema` and its own example(s)
  const visit = (node: any, parts: string[]): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((item, i) => visit(item, [...parts, String(i)]));
    if (node.schema && typeof node.schema === 'object') {
      const schemaPointer = pointer([...parts, 'schema']);
      if ('example' in node) out.push({ where: pointer([...parts, 'example']), schemaPointer, value: node.example });
      for (const [name, ex] of Object.entries<any>(node.examples && !Array.isArray(node.examples) ? node.examples : {})) {
        const example = resolvePointer(doc, ex);
        if (example && 'value' in example) out.push({ where: pointer([...parts, 'examples', name]), schemaPointer, value: example.value });
      }
      visitSchema(node.schema, [...parts, 'schema']);
    }
    for (const [key, child] of Object.entries<any>(node)) {
      if (key === 'schema' || key === 'example' || key === 'examples') continue;
      if (parts.length === 2 && parts[0] === 'components' && parts[1] === 'schemas') visitSchema(child, [...parts, key]);
      else visit(child, [...parts, key]);
    }
  };
  visit(doc, []);
  return out;
}
