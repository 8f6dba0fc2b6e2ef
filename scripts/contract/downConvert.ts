import { Converter } from '@apiture/openapi-down-convert';
import { OpenApiDocument } from './bundle';
import { HTTP_METHODS } from './operations';

/**
 * The OpenAPI 3.0.3 rendering served at /openapi-sdk.json, for SDK generators that do not
 * read 3.1. @apiture/openapi-down-convert does most of it (type arrays of one type and null →
 * nullable, schema `examples` → `example`, truthy `const` → `enum`, $comment, content
 * encoding, license.identifier); this post-pass does only what it lacks, listed in
 * `postPass`. test/sdk.test.ts proves the result with a 3.0 validator and a real generator.
 */
export function toOpenApi30(doc: OpenApiDocument): OpenApiDocument {
  const source = structuredClone(doc);
  // The converter deletes `webhooks`; 3.0 has no such field, but an `x-` extension keeps them
  // readable for people and tools, so they move there before converting (and are converted too).
  if (source.webhooks) {
    source['x-webhooks'] = source.webhooks;
    delete source.webhooks;
  }
  const converted = new Converter(source, { allOfTransform: false }).convert() as OpenApiDocument;
  return postPass(converted);
}

/** 2019-09/2020-12 keywords that 3.0 does not know. The server still enforces them. */
const UNSUPPORTED_KEYWORDS = [
  'dependentRequired', 'dependentSchemas', 'unevaluatedItems', 'unevaluatedProperties', 'prefixItems', '$defs',
  'if', 'then', 'else', 'contains', 'minContains', 'maxContains', 'propertyNames', 'patternProperties',
  '$anchor', '$dynamicRef', '$dynamicAnchor', '$id', '$schema', '$comment', 'contentSchema', 'contentMediaType', 'contentEncoding',
];

function postPass(doc: OpenApiDocument): OpenApiDocument {
  doc.openapi = '3.0.3';
  delete doc.info?.summary; // 3.1 only
  delete doc.jsonSchemaDialect;
  if (doc.components) delete doc.components.pathItems; // 3.1 only; referenced path items are already inlined by bundle.ts
  if (doc.info?.license) delete doc.info.license.identifier;

  // 3.0 allows scopes in a security requirement only for oauth2/openIdConnect: keep them in x-scopes.
  const moveScopes = (holder: any): void => {
    if (!Array.isArray(holder.security)) return;
    const scopes = [...new Set(holder.security.flatMap((req: Record<string, string[]>) => Object.values(req).flat()))];
    holder.security = holder.security.map((req: Record<string, string[]>) => Object.fromEntries(Object.keys(req).map((k) => [k, []])));
    if (scopes.length) holder['x-scopes'] = scopes;
  };
  moveScopes(doc);
  for (const paths of [doc.paths, doc['x-webhooks']]) {
    for (const item of Object.values<any>(paths ?? {})) {
      for (const method of HTTP_METHODS) if (item[method]) moveScopes(item[method]);
    }
  }

  walkSchemas(doc, (schema) => {
    // anyOf/oneOf [X, {type: null}] → X made nullable
    for (const combinator of ['anyOf', 'oneOf'] as const) {
      const list = schema[combinator];
      if (!Array.isArray(list) || !list.some(isNullSchema)) continue;
      const rest = list.filter((s: any) => !isNullSchema(s));
      delete schema[combinator];
      schema.nullable = true;
      if (rest.length === 1 && rest[0].$ref) schema.allOf = [rest[0]];
      else if (rest.length === 1) Object.assign(schema, rest[0], { nullable: true });
      else schema[combinator] = rest.map((s: any) => (s.$ref ? { allOf: [s], nullable: true } : { ...s, nullable: true }));
    }
    // `const` of any value (the converter skips falsy ones such as `false` and `0`)
    if ('const' in schema) {
      schema.enum = [schema.const];
      delete schema.const;
    }
    // numeric exclusive bounds (3.1) → boolean form (3.0); with both forms the stricter bound wins
    for (const [exclusive, bound, stricter] of [['exclusiveMinimum', 'minimum', Math.max], ['exclusiveMaximum', 'maximum', Math.min]] as const) {
      if (typeof schema[exclusive] !== 'number') continue;
      const limit = schema[exclusive];
      if (typeof schema[bound] === 'number' && stricter(schema[bound], limit) === schema[bound] && schema[bound] !== limit) {
        delete schema[exclusive];
      } else {
        schema[bound] = limit;
        schema[exclusive] = true;
      }
    }
    // `type: 'null'` alone, and type arrays the converter leaves (several non-null types)
    if (schema.type === 'null') {
      delete schema.type;
      schema.nullable = true;
      schema.enum = [null];
    } else if (Array.isArray(schema.type)) {
      const types: string[] = schema.type.filter((t: string) => t !== 'null');
      const nullable = schema.type.includes('null');
      if (types.length === 1) {
        schema.type = types[0];
        if (nullable) schema.nullable = true;
      } else {
        // anyOf, not oneOf: `integer` is also a `number`, so branches may overlap
        delete schema.type;
        schema.anyOf = types.map((t, i) => (nullable && i === 0 ? { type: t, nullable: true } : { type: t }));
      }
    }
    // a $ref with siblings: 3.0 ignores everything beside $ref, so `nullable` (or a description)
    // would be lost; wrapped in allOf they apply
    if (typeof schema.$ref === 'string' && Object.keys(schema).length > 1) {
      schema.allOf = [{ $ref: schema.$ref }];
      delete schema.$ref;
    }
    for (const keyword of UNSUPPORTED_KEYWORDS) delete schema[keyword];
  });
  return doc;
}

function isNullSchema(s: any): boolean {
  return s && typeof s === 'object' && (s.type === 'null' || (Array.isArray(s.enum) && s.enum.length === 1 && s.enum[0] === null && !s.type));
}

const SUBSCHEMA = ['items', 'not', 'additionalProperties', 'contains', 'if', 'then', 'else', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties', 'contentSchema'];
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', 'dependentSchemas', '$defs'];

/**
 * Calls `visit` on every schema object of the document, parents before children: the
 * components' schemas and every `schema` of a parameter, header or media type wherever it is
 * (paths, components, x-webhooks, callbacks). Example values are data and are not entered.
 */
function walkSchemas(doc: OpenApiDocument, visit: (schema: any) => void): void {
  const seen = new Set<object>();
  const walkSchema = (schema: any): void => {
    if (!schema || typeof schema !== 'object' || Array.isArray(schema) || seen.has(schema)) return;
    seen.add(schema);
    visit(schema);
    for (const key of SUBSCHEMA) walkSchema(schema[key]);
    for (const key of SUBSCHEMA_LISTS) if (Array.isArray(schema[key])) schema[key].forEach(walkSchema);
    for (const key of SUBSCHEMA_MAPS) if (schema[key] && typeof schema[key] === 'object') Object.values(schema[key]).forEach(walkSchema);
  };
  const walk = (node: any, parentKey: string): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((n) => walk(n, parentKey));
    for (const [key, value] of Object.entries<any>(node)) {
      if (key === 'example' || key === 'examples' || key === 'default' || key === 'enum') continue;
      if (key === 'schema') walkSchema(value);
      else if (key === 'schemas' && parentKey === 'components') Object.values(value ?? {}).forEach(walkSchema);
      else walk(value, key);
    }
  };
  walk(doc, '');
}
