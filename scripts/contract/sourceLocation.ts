import fs from 'node:fs';
import YAML, { isAlias, isMap, isScalar, isSeq, LineCounter, type Document, type Node } from 'yaml';
import { contractFiles, PART_KEYS } from './files';

/** Where a part of the bundled document (generated/openapi.json) is written in contract/. */
export interface SourceLocation {
  /** absolute path of the contract file */
  file: string;
  /** 1-based line and column of the deepest node on the pointer that the file has */
  line: number;
  col: number;
  /** the JSON pointer of that node: the one asked for, or its nearest ancestor written in the file */
  found: string;
}

interface ParsedFile {
  file: string;
  doc: Document.Parsed;
  lines: LineCounter;
}

/**
 * Maps JSON pointers into the bundled document back to contract/ (see buildContract in
 * bundle.ts): `#/paths/<path>/…`, `#/webhooks/<name>/…` and `#/components/<section>/<name>/…` to
 * the file that defines that entry, anything else to openapi.yaml; then to the line and column of
 * the deepest node on the pointer in that file. A pointer past what the file holds (a rule that
 * reports a missing field, e.g. `…/post/summary`) stops at the nearest ancestor that is there.
 */
export class ContractSourceMap {
  private readonly files: ParsedFile[];

  constructor(contractDir: string) {
    this.files = contractFiles(contractDir).map((file) => {
      const lines = new LineCounter();
      const doc = YAML.parseDocument(fs.readFileSync(file, 'utf8'), { lineCounter: lines });
      return { file, doc, lines };
    });
  }

  locate(pointer: string): SourceLocation {
    const segments = parsePointer(pointer);
    const owner = this.owner(segments);
    const { node, depth } = walk(owner.doc, segments);
    const offset = node?.range?.[0] ?? 0;
    const { line, col } = owner.lines.linePos(offset);
    return { file: owner.file, line, col, found: formatPointer(segments.slice(0, depth)) };
  }

  /** The file that defines the top-level entry the pointer is in (the merge makes it unique). */
  private owner(segments: string[]): ParsedFile {
    const [root] = this.files;
    const entryLength = segments[0] === 'components' ? 3 : 2;
    if (!(PART_KEYS as readonly string[]).includes(segments[0]) || segments.length < entryLength) return root;
    const entry = segments.slice(0, entryLength);
    return this.files.find((f) => walk(f.doc, entry).depth === entry.length) ?? root;
  }
}

/** `#/paths/~1v1~1logs/get` → ['paths', '/v1/logs', 'get'] (RFC 6901 escapes, as Redocly writes them) */
export function parsePointer(pointer: string): string[] {
  const body = pointer.replace(/^#/, '');
  if (body === '' || body === '/') return [];
  return body
    .replace(/^\//, '')
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function formatPointer(segments: string[]): string {
  return '#' + segments.map((s) => '/' + s.replace(/~/g, '~0').replace(/\//g, '~1')).join('');
}

/**
 * Follows the segments through the document's nodes as far as they go. `node` is what to cite
 * for the last segment followed: a mapping entry's key (its line is the entry's), a sequence's
 * item, or the document's contents when none was.
 */
function walk(doc: Document.Parsed, segments: string[]): { node: Node | null | undefined; depth: number } {
  let current: unknown = doc.contents;
  let cite = doc.contents as Node | null;
  let depth = 0;
  for (const segment of segments) {
    if (isAlias(current)) current = current.resolve(doc);
    if (isMap(current)) {
      const pair = current.items.find((p) => (isScalar(p.key) ? String(p.key.value) : String(p.key)) === segment);
      if (!pair) break;
      cite = (isScalar(pair.key) ? pair.key : (pair.value as Node | null)) ?? cite;
      current = pair.value;
    } else if (isSeq(current) && /^\d+$/.test(segment) && Number(segment) < current.items.length) {
      current = current.items[Number(segment)];
      cite = (current as Node | null) ?? cite;
    } else break;
    depth++;
  }
  return { node: cite, depth };
}
