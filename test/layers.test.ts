import fs from 'node:fs';
import path from 'node:path';
import { operations, OperationId } from '../generated/operations';

// The import rules of docs/architecture.md ("Layers"), checked on the source itself: layers
// run one way, handlers → http → idempotency/domain → storage → the shared base modules.

const root = path.resolve(__dirname, '..');

/** Every .ts file under `dir` (relative to the repository root). */
function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)));
}

/** The repository-relative targets of a file's relative imports (`import … from`, `export … from`, `import()`). */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const specifiers = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm)].map((m) => m[1]);
  return specifiers
    .filter((s) => s.startsWith('.'))
    .map((s) => path.relative(root, path.resolve(path.dirname(path.join(root, file)), s)));
}

/** What each folder must not import (prefixes of repository-relative paths). */
const FORBIDDEN: { from: string; not: string[] }[] = [
  { from: 'runtime/storage', not: ['runtime/domain', 'runtime/http', 'runtime/idempotency', 'runtime/auth', 'runtime/webhooks', 'runtime/lifecycle', 'handlers'] },
  { from: 'runtime/domain', not: ['runtime/http', 'runtime/idempotency', 'runtime/auth', 'runtime/webhooks', 'runtime/lifecycle', 'handlers'] },
  // the delivery engine runs beside the HTTP server: events and subscriptions through the domain
  // and storage, never through http or a handler
  { from: 'runtime/webhooks', not: ['runtime/http', 'runtime/idempotency', 'runtime/auth', 'runtime/lifecycle', 'handlers'] },
  // process lifecycle (shutdown, cluster) knows servers and processes, not what they serve
  { from: 'runtime/lifecycle', not: ['runtime/http', 'runtime/domain', 'runtime/storage', 'runtime/idempotency', 'runtime/auth', 'runtime/webhooks', 'handlers'] },
  // the metrics registry is imported from anywhere, so it imports no layer
  { from: 'runtime/observability', not: ['runtime/http', 'runtime/domain', 'runtime/storage', 'runtime/idempotency', 'runtime/auth', 'runtime/webhooks', 'runtime/lifecycle', 'handlers'] },
  { from: 'runtime/idempotency', not: ['runtime/http', 'runtime/domain', 'runtime/auth', 'handlers'] },
  { from: 'runtime/auth', not: ['runtime/http', 'runtime/domain', 'runtime/idempotency', 'handlers'] },
  { from: 'runtime/http', not: ['handlers'] },
];

/** The shared base modules import no layer at all. */
const BASE = ['runtime/errors.ts', 'runtime/time.ts', 'runtime/ids.ts', 'runtime/config.ts', 'runtime/cursor.ts', 'runtime/reply.ts', 'runtime/periodic.ts'];
const LAYERS = ['runtime/storage', 'runtime/domain', 'runtime/idempotency', 'runtime/auth', 'runtime/http', 'handlers'];

const under = (file: string, prefix: string) => file === prefix || file.startsWith(`${prefix}/`) || file.startsWith(`${prefix}.`);

describe('layers', () => {
  it('finds the imports it checks (the scanner is not blind)', () => {
    expect(importsOf('runtime/storage/repositories/sitesRepository.ts')).toEqual(expect.arrayContaining(['runtime/storage/pagination', 'runtime/cursor']));
    expect(importsOf('handlers/createSite.ts')).toContain('runtime/domain/sites');
  });

  it.each(FORBIDDEN)('$from imports nothing from $not', ({ from, not }) => {
    const violations = sourceFiles(from).flatMap((file) =>
      importsOf(file).filter((target) => not.some((prefix) => under(target, prefix))).map((target) => `${file} → ${target}`));
    expect(violations).toEqual([]);
  });

  it('the base modules import no layer', () => {
    const violations = BASE.flatMap((file) =>
      importsOf(file).filter((target) => LAYERS.some((prefix) => under(target, prefix))).map((target) => `${file} → ${target}`));
    expect(violations).toEqual([]);
  });

  it('a handler of a write operation reaches storage only through the domain', () => {
    const handlers = sourceFiles('handlers');
    const writes = handlers.filter((file) => operations[path.basename(file, '.ts') as OperationId]?.method !== 'get');
    expect(writes.length).toBeGreaterThan(0);
    const violations = writes.flatMap((file) =>
      importsOf(file).filter((target) => under(target, 'runtime/storage')).map((target) => `${file} → ${target}`));
    expect(violations).toEqual([]);
  });
});
