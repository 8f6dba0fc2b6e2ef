/**
 * `npx tsx bench/profileTop.ts <file.cpuprofile> [--top=25]`: where a `node --cpu-prof` profile
 * spent its time. Prints the functions with the most self time, and the packages (or our own
 * folders) with the most self time and the most inclusive time, as Markdown tables.
 * Profiles come from `npm run bench -- --profile` (bench/results/profiles/).
 */
import fs from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

/** `node_modules/knex/...` → knex; `/dist/runtime/http/app.js` → runtime/http; node internals → (node). */
export function ownerOf(url: string): string {
  if (!url) return '(native / gc / idle)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return `(node) ${url.slice(5).split('/')[0]}`;
  const own = /\/(?:dist\/)?(runtime\/[^/]+|handlers|generated\/validators|generated|bench\/[^/]+)\//.exec(url) ?? /\/(?:dist\/)?(runtime|handlers|generated)\//.exec(url);
  return own ? own[1] : url;
}

export function summarizeProfile(profile: Profile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(id, (self.get(id) ?? 0) + dt);
    total += dt;
  });
  const idle = [...self].filter(([id]) => byId.get(id)!.callFrame.functionName === '(idle)').reduce((n, [, t]) => n + t, 0);
  const busy = total - idle;

  const functions = new Map<string, number>();
  const ownersSelf = new Map<string, number>();
  const ownersInclusive = new Map<string, number>();
  for (const [id, t] of self) {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)') continue;
    const key = `${frame.functionName || '(anonymous)'} — ${ownerOf(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
    functions.set(key, (functions.get(key) ?? 0) + t);
    ownersSelf.set(ownerOf(frame.url), (ownersSelf.get(ownerOf(frame.url)) ?? 0) + t);
    // inclusive: every distinct owner on the stack gets the sample once
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const url = byId.get(cur)!.callFrame.url;
      if (!url) continue;
      const owner = ownerOf(url);
      if (!seen.has(owner)) {
        seen.add(owner);
        ownersInclusive.set(owner, (ownersInclusive.get(owner) ?? 0) + t);
      }
    }
  }
  const pct = (t: number) => `${((t / busy) * 100).toFixed(1)}%`;
  const table = (title: string, map: Map<string, number>, n: number) =>
    [`| ${title} | % of busy time |`, '|---|--:|', ...[...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, t]) => `| ${k.replace(/\|/g, '\\|')} | ${pct(t)} |`)].join('\n');
  return [
    `busy ${(busy / 1e6).toFixed(1)} s of ${(total / 1e6).toFixed(1)} s sampled`,
    '',
    table('function (self time) — where', functions, top),
    '',
    table('package / folder (self time)', ownersSelf, 15),
    '',
    table('package / folder (inclusive: on the stack)', ownersInclusive, 15),
  ].join('\n');
}

if (require.main === module) {
  const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const topArg = process.argv.find((a) => a.startsWith('--top='));
  if (!files.length) {
    console.error('usage: npx tsx bench/profileTop.ts <file.cpuprofile> [--top=25]');
    process.exit(2);
  }
  for (const file of files) {
    console.log(`### ${file}\n`);
    console.log(summarizeProfile(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile, topArg ? Number(topArg.slice(6)) : 25));
    console.log();
  }
}
