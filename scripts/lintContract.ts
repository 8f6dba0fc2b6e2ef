/**
 * `npm run lint:contract`: Redocly's lint (rules in redocly.yaml, exceptions in
 * .redocly.lint-ignore.yaml) on the bundled document generated/openapi.json, with each finding
 * cited where it is written in contract/ rather than in the bundle nobody edits:
 *
 *   contract/paths/logs.yaml:58:5  error  operation-summary  Operation object should contain `summary` field.  (#/paths/~1v1~1logs/post/summary)
 *
 * Exit 1 when a finding is an error or the bundle is not what the contract bundles to now (run
 * `npm run generate` first), 0 when there are only warnings or none, 2 when Redocly itself did not
 * run (its output is printed).
 *
 *   --contract DIR   the contract the bundle was built from (default contract/)
 *   --bundle FILE    the bundled document to lint (default generated/openapi.json)
 *
 * The exceptions in .redocly.lint-ignore.yaml are keyed by generated/openapi.json; they are
 * exceptions to the contract, so they apply to another bundle of it (`--bundle`) too. Redocly
 * runs without telemetry or its update notice unless the environment sets those itself.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import YAML from 'yaml';
import { buildContract } from './contract/bundle';
import { shownPath as shown } from './contract/files';
import { ContractSourceMap } from './contract/sourceLocation';

const root = path.resolve(__dirname, '..');
const DEFAULT_BUNDLE = path.join(root, 'generated', 'openapi.json');
const IGNORE_FILE = path.join(root, '.redocly.lint-ignore.yaml');

/** One entry of `problems` in `redocly lint --format=json` (@redocly/cli 2.x). */
interface RedoclyProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer?: string; source?: { ref?: string }; start?: { line: number; col: number } }[];
  suggest?: string[];
}

function option(name: string, fallback: string): string {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const value = process.argv[at + 1];
  if (!value) throw new Error(`${name} needs a value`);
  return path.resolve(value);
}

/** `1 error`, `2 errors`. */
const counted = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The lint report, or null when Redocly did not run (what it printed is passed on). */
function runRedocly(bundle: string): { problems: RedoclyProblem[]; ignored: number } | null {
  const cli = path.join(path.dirname(require.resolve('@redocly/cli/package.json')), 'bin', 'cli.js');
  const result = spawnSync(process.execPath, [cli, 'lint', bundle, '--format=json', '--max-problems', '100000', '--config', path.join(root, 'redocly.yaml')], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, REDOCLY_TELEMETRY: process.env.REDOCLY_TELEMETRY ?? 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: process.env.REDOCLY_SUPPRESS_UPDATE_NOTICE ?? 'true' },
  });
  let report: unknown;
  try {
    report = JSON.parse(result.stdout);
  } catch {
    report = undefined;
  }
  const { problems, totals } = (report ?? {}) as { problems?: unknown; totals?: { ignored?: number } };
  // a lint result exits 0 (no errors) or 1 (errors) with its JSON report; anything else is Redocly failing
  if (result.error || (result.status !== 0 && result.status !== 1) || !Array.isArray(problems)) {
    console.error(`redocly lint did not run (${result.error?.message ?? `exit ${result.status ?? result.signal}`}):`);
    if (result.stdout) console.error(result.stdout.trimEnd());
    if (result.stderr) console.error(result.stderr.trimEnd());
    return null;
  }
  return { problems: problems as RedoclyProblem[], ignored: totals?.ignored ?? 0 };
}

/** The exceptions .redocly.lint-ignore.yaml lists for generated/openapi.json: rule id → pointers. */
function exceptions(): Map<string, Set<string>> {
  if (!fs.existsSync(IGNORE_FILE)) return new Map();
  const entries = (YAML.parse(fs.readFileSync(IGNORE_FILE, 'utf8')) ?? {})[path.relative(root, DEFAULT_BUNDLE).split(path.sep).join('/')] ?? {};
  return new Map(Object.entries<string[]>(entries).map(([rule, pointers]) => [rule, new Set(pointers)]));
}

function main(): number {
  const contractDir = option('--contract', path.join(root, 'contract'));
  const bundle = option('--bundle', DEFAULT_BUNDLE);
  const report = runRedocly(bundle);
  if (!report) return 2;
  const { problems } = report;

  const ignore = exceptions();
  const kept = problems.filter((p) => !ignore.get(p.ruleId)?.has(p.location[0]?.pointer ?? ''));
  const sources = new ContractSourceMap(contractDir);
  const lines = kept.map((problem) => {
    const at = problem.location[0];
    let where: { file: string; line: number; col: number };
    if (at?.pointer) where = sources.locate(at.pointer);
    else where = { file: bundle, line: at?.start?.line ?? 1, col: at?.start?.col ?? 1 };
    const severity = problem.severity === 'error' ? 'error' : 'warning';
    const suggest = problem.suggest?.length ? `  did you mean: ${problem.suggest.join(', ')}?` : '';
    return { ...where, text: `${shown(where.file)}:${where.line}:${where.col}  ${severity}  ${problem.ruleId}  ${problem.message}${suggest}  (${at?.pointer ?? 'no pointer'})` };
  });
  lines.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.col - b.col);
  // one mistake in an example under a oneOf is reported once per variant it fails, often in the same words
  const shownLines = [...new Set(lines.map(({ text }) => text))];
  for (const text of shownLines) console.log(text);

  const errors = kept.filter((p) => p.severity === 'error').length;
  const warnings = kept.length - errors;
  const ignored = report.ignored + problems.length - kept.length;
  // Redocly's count; a finding it reports several times in the same words is one line above
  const folded = lines.length > shownLines.length ? ` (in ${counted(shownLines.length, 'distinct line')} above)` : '';
  console.log(`${shown(bundle)} (from ${shown(contractDir)}/): ${counted(errors, 'error')}, ${counted(warnings, 'warning')}${folded}${ignored ? `, ${ignored} more excepted in .redocly.lint-ignore.yaml` : ''}`);
  // a lint of the bundle from before the last edit says nothing about the contract as it is
  if (!bundleIsCurrent(contractDir, bundle)) {
    console.log(`${shown(bundle)} is not what ${shown(contractDir)}/ bundles to now: run \`npm run generate\`, then lint again (what is above is about the old bundle)`);
    return 1;
  }
  return errors ? 1 : 0;
}

/** Whether the bundle is what contract/ bundles to: the lines cited are of contract/ as it is now. */
function bundleIsCurrent(contractDir: string, bundle: string): boolean {
  try {
    return isDeepStrictEqual(JSON.parse(fs.readFileSync(bundle, 'utf8')), buildContract(contractDir));
  } catch {
    return false;
  }
}

// exitCode, not exit(): a long report written to a pipe is flushed before the process ends
try {
  process.exitCode = main();
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 2;
}
