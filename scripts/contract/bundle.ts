import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { contractFiles, PART_KEYS, shownPath } from './files';
import { ContractSourceMap, formatPointer } from './sourceLocation';

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
  checkRefs(doc, contractDir);
  checkScopes(doc);
  checkNullableEnums(doc);
  checkEventTypes(doc);
  return doc;
}

function readYaml(file: string): OpenApiDocument {
  let parsed: unknown;
  try {
    parsed = YAML.parse(fs.readFileSync(file, 'utf8'), { uniqueKeys: true });
  } catch (err) {
    // the parser's message has the line and column, not the file (the contract is 14 of them)
    const at = (err as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    throw new Error(`${shownPath(file)}${at ? `:${at.line}:${at.col}` : ''}: ${(err as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object') throw new Error(`${shownPath(file)}: not a YAML mapping`);
  return parsed;
}

function mergeInto(target: Record<string, unknown>, source: Record<string, unknown>, what: string): void {
  for (const [key, value] of Object.entries(source)) {
    if (key in target) throw new Error(`${what} "${key}" is defined twice`);
    target[key] = value;
  }
}

/**
 * Every `$ref` must point at something in the merged document. All that do not are listed, each
 * at its file and line in contract/, with the likeliest name meant when one is close.
 */
function checkRefs(doc: OpenApiDocument, contractDir: string): void {
  const broken: { ref: string; where: string }[] = [];
  const walk = (node: unknown, where: string[]): void => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, [...where, String(i)]));
    if (!node || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') {
        if (!value.startsWith('#/') || resolvePointer(doc, value) === undefined) broken.push({ ref: value, where: formatPointer([...where, key]) });
      } else walk(value, [...where, key]);
    }
  };
  walk(doc, []);
  if (!broken.length) return;
  const sources = new ContractSourceMap(contractDir);
  throw new Error(broken.map(({ ref, where }) => {
    const at = sources.locate(where);
    const meant = closestName(doc, ref);
    return `${shownPath(at.file)}:${at.line}:${at.col}: unresolved $ref ${ref}${meant ? ` (did you mean ${meant}?)` : ''} at ${where}`;
  }).join('\n'));
}

/** The existing sibling of what a broken `$ref` names that is nearest to it (case or up to two edits), if any. */
function closestName(doc: OpenApiDocument, ref: string): string | undefined {
  const at = ref.lastIndexOf('/');
  if (!ref.startsWith('#/') || at < 2) return undefined;
  const parent = resolvePointer(doc, ref.slice(0, at));
  if (!parent || typeof parent !== 'object') return undefined;
  const name = ref.slice(at + 1);
  const candidates = Object.keys(parent)
    .map((key) => ({ key, distance: key.toLowerCase() === name.toLowerCase() ? 0 : editDistance(key, name) }))
    .filter(({ distance }) => distance <= 2)
    .sort((a, b) => a.distance - b.distance);
  return candidates.length ? `${ref.slice(0, at + 1)}${candidates[0].key}` : undefined;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[b.length];
}

/**
 * An event type is written in four places of the contract, which must agree: the `EventType`
 * enum, a webhook of its own (its body schema), a variant of the feed's `Event` and an entry of
 * the delivered shape's `IntegrationEvent` mapping. One that is left out of some is named with
 * the places it is missing from (test/events.test.ts then holds the code's list to the enum).
 * Webhooks that are not events (the test message) are not in the enum.
 */
function checkEventTypes(doc: OpenApiDocument): void {
  const schemas = doc.components?.schemas ?? {};
  const declared: unknown = schemas.EventType?.enum;
  if (!Array.isArray(declared)) return;
  const places: Record<string, { names: string[]; extraAllowed: boolean }> = {
    'components.schemas.EventType.enum': { names: declared.map(String), extraAllowed: false },
    webhooks: { names: Object.keys(doc.webhooks ?? {}), extraAllowed: true },
    'components.schemas.Event.oneOf (a variant whose properties.type.const is the type)': {
      names: (schemas.Event?.oneOf ?? []).map((variant: unknown) => typeNamed(doc, variant)).filter((name: unknown): name is string => typeof name === 'string'),
      extraAllowed: false,
    },
    'components.schemas.IntegrationEvent.discriminator.mapping': { names: Object.keys(schemas.IntegrationEvent?.discriminator?.mapping ?? {}), extraAllowed: false },
  };
  const all = new Set(Object.values(places).flatMap(({ names, extraAllowed }) => (extraAllowed ? [] : names)));
  const problems = [...all].sort().flatMap((type) => {
    const missing = Object.entries(places).filter(([, { names }]) => !names.includes(type)).map(([place]) => place);
    return missing.length ? [`event type ${type} is missing from ${missing.join(', ')}`] : [];
  });
  // the patterns a subscription may list: `*` and one `<resource>.*` per resource of the types
  const resources = [...new Set(declared.map((type) => String(type).split('.')[0]))].sort();
  const patterns: unknown = schemas.EventTypePattern?.enum;
  const expected = ['*', ...resources.map((resource) => `${resource}.*`)];
  if (!Array.isArray(patterns) || JSON.stringify(patterns) !== JSON.stringify(expected)) {
    problems.push(`components.schemas.EventTypePattern.enum must be ${JSON.stringify(expected)} (\`*\` and one \`<resource>.*\` per resource of EventType, in this order), not ${JSON.stringify(patterns)}`);
  }
  if (problems.length) throw new Error(`${problems.join('\n')}\n(each event type is declared in all of these: contract/paths/events.yaml and contract/paths/integrations.yaml)`);
}

/** The one value a variant's `type` property allows (`const`, or an `enum` of one), through `$ref`s. */
function typeNamed(doc: OpenApiDocument, schema: unknown): string | undefined {
  const resolve = (node: any): any => (node && typeof node.$ref === 'string' ? resolve(resolvePointer(doc, node.$ref)) : node);
  const type = resolve(resolve(schema)?.properties?.type);
  if (typeof type?.const === 'string') return type.const;
  return Array.isArray(type?.enum) && type.enum.length === 1 && typeof type.enum[0] === 'string' ? type.enum[0] : undefined;
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
