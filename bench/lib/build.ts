import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';

export const ROOT = path.resolve(__dirname, '..', '..');
export const DIST = path.join(ROOT, 'dist');
export const SERVER_ENTRY = path.join(DIST, 'runtime', 'main.js');

/**
 * The node options `npm start` gives the server (package.json, `scripts.start`: what comes
 * between `node` and the entry point), so that the bench runs it exactly as `npm start` does.
 */
export const SERVER_NODE_OPTIONS: string[] = (() => {
  const start: string = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.start;
  const words = start.trim().split(/\s+/);
  if (words[0] !== 'node' || words[words.length - 1] !== 'dist/runtime/main.js') throw new Error(`bench: cannot read the node options of scripts.start: ${start}`);
  return words.slice(1, -1);
})();

const SOURCE_DIRS = ['runtime', 'handlers', 'generated'];

/** Newest modification time (ms) of the files the build compiles. */
function newestSource(): number {
  let newest = 0;
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else newest = Math.max(newest, fs.statSync(full).mtimeMs);
    }
  };
  for (const dir of SOURCE_DIRS) walk(path.join(ROOT, dir));
  return Math.max(newest, fs.statSync(path.join(ROOT, 'tsconfig.build.json')).mtimeMs);
}

/** A source file (.ts) without its compiled .js: the build predates it. */
function missingOutput(): string | undefined {
  for (const dir of ['runtime', 'handlers']) {
    const stack = [path.join(ROOT, dir)];
    while (stack.length) {
      const current = stack.pop()!;
      for (const entry of fs.readdirSync(current, { withFileTypes: true })) {
        const full = path.join(current, entry.name);
        if (entry.isDirectory()) stack.push(full);
        else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
          const out = path.join(DIST, path.relative(ROOT, full)).replace(/\.ts$/, '.js');
          if (!fs.existsSync(out)) return full;
        }
      }
    }
  }
  return undefined;
}

/**
 * The bench measures the compiled server (`dist/`, what `npm start` runs). tsc rewrites every
 * output on each (non-incremental) build, so dist is stale when a source file is newer than
 * the compiled entry point, or has no output at all.
 */
export function ensureBuilt(force: boolean, log: (line: string) => void): void {
  const reason = force
    ? '--build given'
    : !fs.existsSync(SERVER_ENTRY)
      ? 'dist/ is missing'
      : newestSource() > fs.statSync(SERVER_ENTRY).mtimeMs
        ? 'sources are newer than dist/'
        : missingOutput() && `${path.relative(ROOT, missingOutput()!)} has no compiled output`;
  if (!reason) return;
  log(`building (${reason}): npm run build`);
  const result = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error('npm run build failed; the bench measures the compiled server, fix the build first');
}
