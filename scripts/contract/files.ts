import fs from 'node:fs';
import path from 'node:path';

// Where the contract's parts are written: what bundle.ts merges, and what lint findings and
// bundling errors cite (sourceLocation.ts).

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

/** A path as the reader can open it: relative to the working directory when below it. */
export function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}
