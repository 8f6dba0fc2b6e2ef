import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildContract } from '../scripts/contract/bundle';
import { buildOperationIndex } from '../scripts/contract/operations';
import { renderValidators } from '../scripts/contract/validators';

// The generator refuses a contract that would generate something silently wrong.
const ROOT = `openapi: 3.1.0
info: { title: t, version: 1.0.0 }
components:
  schemas:
    Thing: { type: object }
`;

function contractDir(files: Record<string, string>, root = ROOT): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-contract-'));
  fs.mkdirSync(path.join(dir, 'paths'));
  fs.writeFileSync(path.join(dir, 'openapi.yaml'), root);
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, 'paths', name), text);
  return dir;
}

const operation = (id: string, extra = '') => `
      operationId: ${id}
      tags: [Things]
      security: [{ bearerAuth: ['things:read'] }]${extra}
      responses:
        '200': { description: ok, content: { application/json: { schema: { $ref: '#/components/schemas/Thing' } } } }`;

describe('contract bundling (npm run generate)', () => {
  it('merges the resource files into one document', () => {
    const doc = buildContract(contractDir({ 'things.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings')}\n` }));
    expect(buildOperationIndex(doc)).toEqual([expect.objectContaining({ operationId: 'listThings', method: 'get', path: '/v1/things', scopes: ['things:read'] })]);
  });

  it('refuses a path defined in two files', () => {
    const dir = contractDir({
      'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings')}\n`,
      'b.yaml': `paths:\n  /v1/things:\n    post:${operation('createThing')}\n`,
    });
    expect(() => buildContract(dir)).toThrow('contract/paths/b.yaml: path "/v1/things" is defined twice');
  });

  it('refuses a $ref that points nowhere: every one, at its file and line, with the name likely meant', () => {
    const dir = contractDir({
      'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings').replace('Thing\'', 'Thingy\'')}\n`,
      'b.yaml': `paths:\n  /v1/others:\n    get:${operation('listOthers').replace('Thing\'', 'Nothing\'')}\n`,
    });
    let message = '';
    try {
      buildContract(dir);
    } catch (err) {
      message = (err as Error).message;
    }
    const line = (file: string) => fs.readFileSync(path.join(dir, 'paths', file), 'utf8').split('\n').findIndex((text) => text.includes('$ref')) + 1;
    expect(message.split('\n')).toEqual([
      expect.stringMatching(new RegExp(`paths/a\\.yaml:${line('a.yaml')}:\\d+: unresolved \\$ref #/components/schemas/Thingy \\(did you mean #/components/schemas/Thing\\?\\) at #/paths/~1v1~1things/get/responses/200/content/application~1json/schema/\\$ref$`)),
      expect.stringMatching(new RegExp(`paths/b\\.yaml:${line('b.yaml')}:\\d+: unresolved \\$ref #/components/schemas/Nothing at `)),
    ]);
  });

  it('refuses an event type written in some of its places and not the others, naming them', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-contract-events-'));
    try {
      fs.cpSync(path.join(__dirname, '..', 'contract'), dir, { recursive: true });
      const events = path.join(dir, 'paths', 'events.yaml');
      fs.writeFileSync(events, fs.readFileSync(events, 'utf8').replace('        - user.updated\n', '        - user.updated\n        - user.deleted\n'));
      expect(() => buildContract(dir)).toThrow('event type user.deleted is missing from webhooks, components.schemas.Event.oneOf (a variant whose properties.type.const is the type), components.schemas.IntegrationEvent.discriminator.mapping');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes a feed variant written as its own component, or with an enum of one type', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-contract-variants-'));
    try {
      fs.cpSync(path.join(__dirname, '..', 'contract'), dir, { recursive: true });
      const events = path.join(dir, 'paths', 'events.yaml');
      const text = fs.readFileSync(events, 'utf8');
      const siteCreated = text.split('\n').find((line) => line.includes('{ const: site.created }, data'))!;
      const siteDeleted = text.split('\n').find((line) => line.includes('{ const: site.deleted }, data'))!;
      expect([siteCreated, siteDeleted]).toEqual([expect.stringMatching(/^ {8}- \{/), expect.stringMatching(/^ {8}- \{/)]);
      const moved = text
        .replace(siteCreated, "        - $ref: '#/components/schemas/SiteCreatedFeedEvent'")
        .replace(siteDeleted, siteDeleted.replace('{ const: site.deleted }', '{ enum: [site.deleted] }'))
        .replace('    EventSequence:', `    SiteCreatedFeedEvent:\n${siteCreated.replace(/^ {8}- /, '      ')}\n    EventSequence:`);
      fs.writeFileSync(events, moved);
      expect(() => buildContract(dir)).not.toThrow();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the file of a YAML syntax error, with its line', () => {
    const dir = contractDir({ 'a.yaml': 'paths:\n  /v1/things:\n    get: [unclosed\n' });
    expect(() => buildContract(dir)).toThrow(new RegExp(`${path.join(dir, 'paths', 'a.yaml').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:\\d+:\\d+: Flow sequence`));
  });

  it('refuses an operationId used twice and an operation without a scope', () => {
    const twice = buildContract(contractDir({ 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings')}\n  /v1/other:\n    get:${operation('listThings')}\n` }));
    expect(() => buildOperationIndex(twice)).toThrow('operationId listThings is used twice');
    const unscoped = buildContract(contractDir({ 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings').replace("['things:read']", '[]')}\n` }));
    expect(() => buildOperationIndex(unscoped)).toThrow('listThings names no scope in its security requirement');
  });

  it('refuses a scope the bearer scheme does not declare (a typo would be a new scope no key has), and a declared one no operation requires', () => {
    const root = (scopes: string) => `${ROOT}  securitySchemes:\n    bearerAuth:\n      type: http\n      scheme: bearer\n      x-scopes:\n${scopes}`;
    const things = { 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings')}\n` };
    expect(() => buildContract(contractDir(things, root('        things:read: Read things.\n')))).not.toThrow();
    expect(() => buildContract(contractDir(things, root('        thigns:read: Read things.\n'))))
      .toThrow('listThings (GET /v1/things) requires scope "things:read", which components.securitySchemes.bearerAuth.x-scopes does not declare (declared: thigns:read)');
    expect(() => buildContract(contractDir(things, root('        things:read: Read things.\n        things:write: Change things.\n'))))
      .toThrow('components.securitySchemes.bearerAuth.x-scopes declares things:write, which no operation requires');
  });

  it('refuses an enum that leaves out the null its type allows (the validator would refuse what the types allow)', () => {
    const withField = (schema: string) => contractDir({ 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings')}\ncomponents:\n  schemas:\n    Level: ${schema}\n` });
    expect(() => buildContract(withField("{ type: [string, 'null'], enum: [low, high, null] }"))).not.toThrow();
    expect(() => buildContract(withField("{ type: [string, 'null'], enum: [low, high] }")))
      .toThrow('the schema at #/components/schemas/Level allows null by its type but its enum does not list null');
  });

  it('names the schema a validator cannot be compiled from (Ajv\'s strict mode names only a path inside it)', () => {
    const tagged = "{ type: object, properties: { tags: { type: array, prefixItems: [{ const: primary }] } } }";
    const inComponent = buildContract(contractDir({ 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings').replace('schemas/Thing', 'schemas/Tagged')}\ncomponents:\n  schemas:\n    Tagged: ${tagged}\n` }));
    expect(() => renderValidators(inComponent, buildOperationIndex(inComponent))).toThrow(/^components\.schemas\.Tagged: strict mode: "prefixItems" is 1-tuple/);
    const inline = buildContract(contractDir({ 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings').replace("{ $ref: '#/components/schemas/Thing' }", tagged)}\n` }));
    expect(() => renderValidators(inline, buildOperationIndex(inline))).toThrow(/^the schema of listThings \(response 200\): strict mode/);
  });

  it('refuses a deprecated operation without the dates its headers are made from', () => {
    const noDates = buildContract(contractDir({ 'a.yaml': `paths:\n  /v1/things:\n    get:${operation('listThings', '\n      deprecated: true\n      x-sunset: 2027-01-31')}\n` }));
    expect(() => buildOperationIndex(noDates)).toThrow('listThings is deprecated: it needs x-deprecated-at and x-sunset');
  });
});
