import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';

export type OpenApiDocument = Record<string, any>;

/**
 * Merges contract/openapi.yaml with every contract/paths/*.yaml (in name order). Each
 * resource file holds `paths` and `components` (and the event group also `webhooks`); every `$ref` is local to the merged
 * document (`#/components/...`), so merging is all the bundling there is. A path or a
 * component defined twice is an error, never a silent override.
 */
export function buildContract(contractDir: string): OpenApiDocument {
  const [rootFile, ...partFiles] = contractFiles(contractDir);
  const doc = readYaml(rootFile);
  doc.paths ??= {};
  doc.components ??= {};
  for (const partFile of partFiles) {
    const file = path.basename(partFile);
    const part = readYaml(partFile);
    for (const key of Object.keys(part)) {
      if (!(PART_KEYS as readonly string[]).includes(key)) throw new Error(`contract/paths/${file}: unexpected top-level key "${key}" (only paths, webhooks and components)`);
    }
    mergeInto(doc.paths, part.paths ?? {}, `contract/paths/${file}: path`);
    if (part.webhooks) mergeInto((doc.webhooks ??= {}), part.webhooks, `contract/paths/${file}: webhook`);
    for (const [section, entries] of Object.entries<Record<string, unknown>>(part.components ?? {})) {
      doc.components[section] ??= {};
      mergeInto(doc.components[section], entries, `contract/paths/${file}: components.${section}`);
    }
  }
  checkRefs(doc);
  checkScopes(doc);
  checkNullableEnums(doc);
  return doc;
}

/** The top-level keys a resource file (contract/paths/*.yaml) may hold. */
export const PART_KEYS = ['paths', 'webhooks', 'components'] as const;

/**
 * The files buildContract merges, in its order: contract/openapi.yaml first, then every
 * contract/paths/*.yaml in name order (absolute paths). Each path, webhook and component
 * (`components.<section>.<name>`) is defined in exactly one of them; everything else is in
 * openapi.yaml.
 */
export function contractFiles(contractDir: string): string[] {
  const pathsDir = path.join(contractDir, 'paths');
  const parts = fs.readdirSync(pathsDir).filter((f) => f.endsWith('.yaml')).sort();
  return [path.join(contractDir, 'openapi.yaml'), ...parts.map((f) => path.join(pathsDir, f))].map((f) => path.resolve(f));
}

function readYaml(file: string): OpenApiDocument {
  const parsed = YAML.parse(fs.readFileSync(file, 'utf8'), { uniqueKeys: true });
  if (!parsed || typeof parsed !== 'object') throw new Error(`${file}: not a YAML mapping`);
  return parsed;
}

function mergeInto(target: Record<string, unknown>, source: Record<string, unknown>, what: string): void {
  for (const [key, value] of Object.entries(source)) {
    if (key in target) throw new Error(`${what} "${key}" is defined twice`);
    target[key] = value;
  }
}

/** Every `$ref` must point at something in the merged document. */
function checkRefs(doc: OpenApiDocument): void {
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}/${i}`));
    if (!node || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') {
        if (!value.startsWith('#/') || resolvePointer(doc, value) === undefined) throw new Error(`unresolved $ref ${value} at ${where}`);
      } else walk(value, `${where}/${key}`);
    }
  };
  walk(doc, '#');
}

/** The methods an OpenAPI path item may hold, in the specification's order. */
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/**
 * Every scope an operation requires is one of those the bearer scheme declares (`x-scopes`), and
 * every declared one is required somewhere. A scope is granted to keys by name and kept with them,
 * so a misspelt one would be a new scope that no existing key has, not an error.
 */
function checkScopes(doc: OpenApiDocument): void {
  const scheme = doc.components?.securitySchemes?.bearerAuth;
  if (!scheme) return;
  const declared = Object.keys(scheme['x-scopes'] ?? {});
  const used = new Set<string>();
  for (const [route, item] of Object.entries<Record<string, any>>(doc.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      for (const requirement of op?.security ?? []) {
        for (const scope of requirement.bearerAuth ?? []) {
          used.add(scope);
          if (!declared.includes(scope)) throw new Error(`${op.operationId} (${method.toUpperCase()} ${route}) requires scope "${scope}", which components.securitySchemes.bearerAuth.x-scopes does not declare (declared: ${declared.join(', ')})`);
        }
      }
    }
  }
  const unused = declared.filter((scope) => !used.has(scope));
  if (unused.length) throw new Error(`components.securitySchemes.bearerAuth.x-scopes declares ${unused.join(', ')}, which no operation requires`);
}

/**
 * A schema that allows null by its type (`type: [string, 'null']`) and lists an `enum` must list
 * null in it: JSON Schema applies both, so the validator would refuse the null that the
 * generated types (and the 3.0 SDK document's `nullable`) allow.
 */
function checkNullableEnums(doc: OpenApiDocument): void {
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}/${i}`));
    if (!node || typeof node !== 'object') return;
    const schema = node as Record<string, unknown>;
    const nullable = schema.type === 'null' || (Array.isArray(schema.type) && schema.type.includes('null'));
    if (nullable && Array.isArray(schema.enum) && !schema.enum.includes(null)) {
      throw new Error(`the schema at ${where} allows null by its type but its enum does not list null: add null to the enum, or the validator refuses the null its types allow`);
    }
    for (const [key, value] of Object.entries(schema)) walk(value, `${where}/${key}`);
  };
  walk(doc, '#');
}

export function resolvePointer(doc: unknown, ref: string): any {
  return ref
    .slice(2)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<any>((node, key) => (node && typeof node === 'object' ? node[key] : undefined), doc);
}

/** Follows `$ref`s until a non-reference object. */
export function deref<T = any>(doc: OpenApiDocument, node: any): T {
  let current = node;
  for (let i = 0; current && typeof current === 'object' && typeof current.$ref === 'string'; i++) {
    if (i > 20) throw new Error(`$ref cycle at ${node.$ref}`);
    current = resolvePointer(doc, current.$ref);
  }
  return current;
}
