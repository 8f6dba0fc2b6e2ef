import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.join(__dirname, '..', '..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const run = promisify(execFile);

/**
 * `npm run <script> -- …` as a user runs it: scripts/<file> through tsx from the project's folder,
 * on `databaseUrl`. Answers the exit code and both outputs (a failing script does not throw).
 */
export async function runScript(file: string, args: string[], databaseUrl: string, timeoutMs = 30_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(TSX, [path.join('scripts', file), ...args], { cwd: ROOT, env: { ...process.env, ...env, DATABASE_URL: databaseUrl }, timeout: timeoutMs });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
