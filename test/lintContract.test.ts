import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildContract } from '../scripts/contract/bundle';
import { ContractSourceMap, formatPointer } from '../scripts/contract/sourceLocation';

const root = path.resolve(__dirname, '..');
const contractDir = path.join(root, 'contract');

/** The text of a 1-based line from its 1-based column on. */
function textAt(file: string, line: number, col: number): string {
  return fs.readFileSync(file, 'utf8').split('\n')[line - 1].slice(col - 1);
}

/** `key:` at the start of the text, the key plain or quoted. */
const startsWithKey = (key: string) => new RegExp(`^(${escape(key)}|'${escape(key)}'|"${escape(key)}"):`);
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('lint findings cited in contract/ (scripts/contract/sourceLocation.ts)', () => {
  const sources = new ContractSourceMap(contractDir);

  it.each([
    ['#/paths/~1v1~1logs/get/responses/200', 'paths/logs.yaml', "'200':"],
    ['#/paths/~1v1~1logs/get/parameters/1', 'paths/logs.yaml', 'name: entityId'],
    ['#/components/schemas/LogEntityType', 'paths/logs.yaml', 'LogEntityType:'],
    ['#/webhooks/checkin.checked_out', 'paths/events.yaml', 'checkin.checked_out:'],
    ['#/paths/~1healthz/get/responses', 'paths/health.yaml', 'responses:'],
    ['#/components/responses/Internal', 'openapi.yaml', 'Internal:'],
    ['#/info/license', 'openapi.yaml', 'license:'],
  ])('%s is in contract/%s, on the line of %s', (pointer, file, text) => {
    const at = sources.locate(pointer);
    expect(path.relative(contractDir, at.file)).toBe(file);
    expect(at.found).toBe(pointer);
    expect(textAt(at.file, at.line, at.col)).toContain(text);
  });

  it('cites the nearest ancestor the file has for a pointer past it (a rule reporting a missing field)', () => {
    const at = sources.locate('#/paths/~1v1~1logs/post/summary-that-is-not-there');
    expect(path.relative(contractDir, at.file)).toBe('paths/logs.yaml');
    expect(at.found).toBe('#/paths/~1v1~1logs/post');
    expect(textAt(at.file, at.line, at.col)).toMatch(/^post:/);
  });

  it('finds every path, webhook and component of the bundle on its own key in the file that defines it', () => {
    const doc = buildContract(contractDir);
    const entries: string[][] = [
      ...Object.keys(doc.paths).map((key) => ['paths', key]),
      ...Object.keys(doc.webhooks ?? {}).map((key) => ['webhooks', key]),
      ...Object.entries<Record<string, unknown>>(doc.components).flatMap(([section, names]) => Object.keys(names).map((key) => ['components', section, key])),
    ];
    expect(entries.length).toBeGreaterThan(50);
    for (const entry of entries) {
      const at = sources.locate(formatPointer(entry));
      expect({ entry, found: at.found }).toEqual({ entry, found: formatPointer(entry) });
      expect({ entry, text: textAt(at.file, at.line, at.col) }).toEqual({ entry, text: expect.stringMatching(startsWithKey(entry[entry.length - 1])) });
    }
  });
});

describe('npm run lint:contract (scripts/lintContract.ts)', () => {
  let tmp: string;
  afterAll(() => tmp && fs.rmSync(tmp, { recursive: true, force: true }));

  it('fails on an operation without a summary, citing its line in contract/paths/, not the bundle', async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-lint-'));
    const copy = path.join(tmp, 'contract');
    fs.cpSync(contractDir, copy, { recursive: true });
    const logs = path.join(copy, 'paths', 'logs.yaml');
    const lines = fs.readFileSync(logs, 'utf8').split('\n');
    const summary = lines.findIndex((line) => line.trim() === 'summary: Add a log entry to an entity');
    expect(summary).toBeGreaterThan(0);
    let post = summary;
    while (!/^\s+post:\s*$/.test(lines[post])) post--;
    fs.writeFileSync(logs, [...lines.slice(0, summary), ...lines.slice(summary + 1)].join('\n'));
    const bundle = path.join(tmp, 'openapi.json');
    fs.writeFileSync(bundle, JSON.stringify(buildContract(copy), null, 2) + '\n');

    const result = await promisify(execFile)(process.execPath, [path.join(root, 'node_modules/tsx/dist/cli.mjs'), 'scripts/lintContract.ts', '--contract', copy, '--bundle', bundle], { cwd: root, timeout: 60_000 })
      .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), (err: { code: number; stdout: string; stderr: string }) => err);

    expect({ code: result.code, stderr: result.stderr.includes('did not run') ? result.stderr : '' }).toEqual({ code: 1, stderr: '' });
    const findings = result.stdout.split('\n').filter((line) => /  (error|warning)  /.test(line));
    const column = lines[post].indexOf('post:') + 1;
    expect(findings).toEqual([`${logs}:${post + 1}:${column}  error  operation-summary  Operation object should contain \`summary\` field.  (#/paths/~1v1~1logs/post/summary)`]);
    // the exceptions in .redocly.lint-ignore.yaml hold for this bundle of the contract too
    expect(result.stdout).toMatch(/: 1 error, 0 warnings, 4 more excepted in \.redocly\.lint-ignore\.yaml\n$/);
  }, 60_000);

  const lint = (args: string[]) => promisify(execFile)(process.execPath, [path.join(root, 'node_modules/tsx/dist/cli.mjs'), 'scripts/lintContract.ts', ...args], { cwd: root, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 })
    .then(({ stdout }) => ({ code: 0, stdout }), (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }));

  it('fails on a bundle older than the contract (an edit not generated yet), even when it finds nothing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-lint-stale-'));
    try {
      const copy = path.join(dir, 'contract');
      fs.cpSync(contractDir, copy, { recursive: true });
      const logs = path.join(copy, 'paths', 'logs.yaml');
      fs.writeFileSync(logs, fs.readFileSync(logs, 'utf8').replace('summary: Add a log entry to an entity', 'summary: Append a log entry to an entity'));
      const result = await lint(['--contract', copy, '--bundle', path.join(root, 'generated', 'openapi.json')]);
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/: 0 errors, 0 warnings, 4 more excepted in \.redocly\.lint-ignore\.yaml\n.* is not what .* bundles to now: run `npm run generate`, then lint again/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('counts every finding (Redocly stops at 100 unless told), each line shown once: a wrong example of the feed fails once per event type it is checked against', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-lint-many-'));
    try {
      const copy = path.join(dir, 'contract');
      fs.cpSync(contractDir, copy, { recursive: true });
      const events = path.join(copy, 'paths', 'events.yaml');
      const text = fs.readFileSync(events, 'utf8');
      // the list's example check-in, in a status that does not exist
      expect(text).toContain('"status":"active","arrivalWindowStartAt"');
      fs.writeFileSync(events, text.replace('"status":"active","arrivalWindowStartAt"', '"status":"on_site","arrivalWindowStartAt"'));
      const bundle = path.join(dir, 'openapi.json');
      fs.writeFileSync(bundle, JSON.stringify(buildContract(copy), null, 2) + '\n');
      const result = await lint(['--contract', copy, '--bundle', bundle]);
      expect(result.code).toBe(1);
      const findings = result.stdout.split('\n').filter((line) => /  (error|warning)  /.test(line));
      const reported = Number(/: (\d+) errors?,/.exec(result.stdout)?.[1]);
      // Redocly's own report stops at 100 unless told otherwise; the count is Redocly's, the lines are distinct
      expect(reported).toBeGreaterThan(100);
      expect(new Set(findings).size).toBe(findings.length);
      expect(result.stdout).toContain(`: ${reported} errors, 0 warnings (in ${findings.length} distinct lines above)`);
      expect(findings.every((line) => line.startsWith(events))).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
