import { Converter } from '@apiture/openapi-down-convert';
import { OpenApiDocument } from './bundle';
import { HTTP_METHODS } from './operations';

/**
 * The OpenAPI 3.0.3 rendering served at /openapi-sdk.json, for SDK generators that do not
 * read 3.1. @apiture/openapi-down-convert does most of it (type arrays with null → nullable,
 * schema `examples` → `example`, `const` → `enum`, webhooks, license.identifier); this
 * post-pass does only what it lacks, listed in `postPass`.
 */
export function toOpenApi30(doc: OpenApiDocument): OpenApiDocument {
  const converted = new Converter(structuredClone(doc), { allOfTransform: false }).convert() as OpenApiDocument;
  return postPass(converted);
}

function postPass(doc: OpenApiDocument): OpenApiDocument {
  doc.openapi = '3.0.3';
  delete doc.info?.summary; // 3.1 only
  // 3.0 allows scopes in a security requirement only for oauth2/openIdConnect: keep them in x-scopes.
  const moveScopes = (holder: any): void => {
    if (!Array.isArray(holder.security)) return;
    const scopes = [...new Set(holder.security.flatMap((req: Record<string, string[]>) => Object.values(req).flat()))];
    holder.security = holder.security.map((req: Record<string, string[]>) => Object.fromEntries(Object.keys(req).map((k) => [k, []])));
    if (scopes.length) holder['x-scopes'] = scopes;
  };
  moveScopes(doc);
  for (const item of Object.values<any>(doc.paths ?? {})) {
    for (const method of HTTP_METHODS) if (item[method]) moveScopes(item[method]);
  }
  walkSchemas(doc, (schema) => {
    // numeric exclusive bounds (3.1) → boolean form (3.0)
    for (const [exclusive, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']] as const) {
      if (typeof schema[exclusive] === 'number') {
        schema[bound] = schema[exclusive];
        schema[exclusive] = true;
      }
    }
    // a type array with several non-null types → oneOf
    if (Array.isArray(schema.type)) {
      const types = schema.type.filter((t: string) => t !== 'null');
      if (schema.type.includes('null')) schema.nullable = true;
      if (types.length === 1) schema.type = types[0];
      else {
        delete schema.type;
        schema.oneOf = types.map((t: string) => ({ type: t }));
      }
    }
    // anyOf/oneOf [X, {type: null}] → X made nullable; a nullable $ref is wrapped in allOf
    for (const combinator of ['anyOf', 'oneOf'] as const) {
      const list = schema[combinator];
      if (!Array.isArray(list) || !list.some(isNullSchema)) continue;
      const rest = list.filter((s: any) => !isNullSchema(s));
      delete schema[combinator];
      schema.nullable = true;
      if (rest.length === 1 && rest[0].$ref) schema.allOf = [rest[0]];
      else if (rest.length === 1) Object.assign(schema, rest[0], { nullable: true });
      else schema[combinator] = rest;
    }
    // 2019-09/2020-12 keywords a 3.0 tool does not know: the server still enforces them
    for (const keyword of ['dependentRequired', 'dependentSchemas', 'unevaluatedItems', 'prefixItems', '$defs']) delete schema[keyword];
  });
  return doc;
}

function isNullSchema(s: any): boolean {
  return s && typeof s === 'object' && (s.type === 'null' || (s.enum && s.enum.length === 1 && s.enum[0] === null));
}

/** Calls `visit` on every schema object in components and operations. */
function walkSchemas(doc: OpenApiDocument, visit: (schema: any) => void): void {
  const seen = new Set<object>();
  const walkSchema = (schema: any): void => {
    if (!schema || typeof schema !== 'object' || seen.has(schema)) return;
    seen.add(schema);
    visit(schema);
    for (const key of ['items', 'not', 'additionalProperties', 'contains', 'if', 'then', 'else']) if (schema[key] && typeof schema[key] === 'object') walkSchema(schema[key]);
    for (const key of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(schema[key])) schema[key].forEach(walkSchema);
    if (schema.properties) Object.values(schema.properties).forEach(walkSchema);
  };
  const walkContent = (content: any): void => Object.values<any>(content ?? {}).forEach((media) => walkSchema(media.schema));
  Object.values(doc.components?.schemas ?? {}).forEach(walkSchema);
  Object.values<any>(doc.components?.parameters ?? {}).forEach((p) => walkSchema(p.schema));
  Object.values<any>(doc.components?.headers ?? {}).forEach((h) => walkSchema(h.schema));
  Object.values<any>(doc.components?.responses ?? {}).forEach((r) => walkContent(r.content));
  Object.values<any>(doc.components?.requestBodies ?? {}).forEach((r) => walkContent(r.content));
  for (const item of Object.values<any>(doc.paths ?? {})) {
    (item.parameters ?? []).forEach((p: any) => walkSchema(p.schema));
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!op) continue;
      (op.parameters ?? []).forEach((p: any) => walkSchema(p.schema));
      walkContent(op.requestBody?.content);
      Object.values<any>(op.responses ?? {}).forEach((r) => {
        walkContent(r.content);
        Object.values<any>(r.headers ?? {}).forEach((h) => walkSchema(h.schema));
      });
    }
  }
}
