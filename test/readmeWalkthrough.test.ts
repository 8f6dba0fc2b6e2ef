import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describeEachDatabase } from './support/testApp';
import { freePort, startServerProcess, ServerProcess } from './support/serverProcess';

/**
 * The README's curl walk-through, run as written: its shell blocks, in order, in one bash with
 * `set -euo pipefail`, against a real server process, twice on the same database (a second run
 * must not meet the first run's Idempotency-Keys or names). The only edits are the two
 * placeholders a reader fills in: the address and the key. `curl` is wrapped to log each
 * answer's status, so every call is checked against the output the README shows under its
 * block: an error where the README shows one (with the same `code`), a 2xx everywhere else, and
 * the values the README shows are the values answered (see `differences` for what a run makes
 * anew and is compared by type only).
 */

const README = path.resolve(__dirname, '..', 'README.md');
const PLACEHOLDER_URL = 'http://127.0.0.1:8080';
const PLACEHOLDER_KEY = 'fop_…';

const missing = ['bash', 'curl', 'jq'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
if (missing.length) console.info(`README walk-through test skipped: ${missing.join(', ')} not installed.`);
const describeWithTools = missing.length ? describe.skip : describe;

interface Step {
  script: string;
  /** The output lines the README shows for the block, one per curl call. */
  shown: string[];
}

/** The README's walk-through section, up to the next `## ` heading. */
function walkthroughSection(markdown: string): string {
  const start = markdown.indexOf('## Walk-through');
  return markdown.slice(start, markdown.indexOf('\n## ', start + 1));
}

/** The walk-through's shell blocks, each with the output block that follows it (if any). */
function walkthroughSteps(markdown: string): Step[] {
  const section = walkthroughSection(markdown);
  const fences = [...section.matchAll(/```(\w+)\n([\s\S]*?)```\n/g)].map((m) => ({ lang: m[1], text: m[2], at: m.index!, end: m.index! + m[0].length }));
  const steps: Step[] = [];
  fences.forEach((fence, i) => {
    if (fence.lang !== 'sh') return;
    const next = fences[i + 1];
    const follows = next && next.lang === 'json' && next.at === fence.end;
    steps.push({ script: fence.text, shown: follows ? next.text.trim().split('\n') : [] });
  });
  return steps;
}

/** The walk-through's receiver (its one `js` block), run as the README says: `SECRET=… node receiver.js`. */
function receiverSource(markdown: string): string {
  const blocks = [...walkthroughSection(markdown).matchAll(/```js\n([\s\S]*?)```\n/g)].map((m) => m[1]);
  if (blocks.length !== 1) throw new Error(`the walk-through has ${blocks.length} js blocks, expected the receiver's one`);
  return blocks[0];
}

function parseOrText(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

interface Call {
  status: number;
  body: string;
}

function runWalkthrough(steps: Step[], baseUrl: string, key: string, workDir: string, round: number, receiverPort: number): { calls: Call[][]; received: string; output: string; exit: number | null } {
  const log = path.join(workDir, `calls-${round}.log`);
  const prelude = [
    'set -euo pipefail',
    // the receiver's port, as a reader whose 9000 is taken sets it in both shells
    `export RECEIVER_PORT=${receiverPort}`,
    // node gives a child sockets for stdio, which `tee /dev/stderr` cannot reopen (a terminal or a
    // pipe can): stderr goes through a pipe, as in a shell
    'exec 2> >(cat >&2)',
    // the real curl with the status appended; the log keeps "<block> <status> <body>" per call
    'curl() {',
    '  local out status',
    `  out=$(command curl -sS -w '\\n%{http_code}' "$@")`,
    `  status=\${out##*$'\\n'}; out=\${out%$'\\n'*}`,
    `  printf '%s %s %s\\n' "$BLOCK" "$status" "$out" >> ${JSON.stringify(log)}`,
    `  printf '%s' "$out"`,
    '}',
  ].join('\n');
  // the reader's second terminal: the README's receiver, started once the subscription's secret
  // is known (after the block that reads it), stopped when the walk-through ends
  fs.writeFileSync(path.join(workDir, 'receiver.js'), receiverSource(fs.readFileSync(README, 'utf8')));
  const receiverLog = path.join(workDir, `receiver-${round}.log`);
  const startReceiver = [
    `SECRET="$SECRET" node receiver.js > ${JSON.stringify(receiverLog)} 2>&1 &`,
    'RECEIVER=$!',
    "trap 'kill $RECEIVER 2>/dev/null; wait $RECEIVER 2>/dev/null || true' EXIT",
    'for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$RECEIVER_PORT) 2>/dev/null && break; sleep 0.1; done',
  ].join('\n');
  const subscribed = steps.findIndex((step) => step.script.includes('read HOOK SECRET'));
  if (subscribed < 0) throw new Error('the walk-through has no block that subscribes the receiver (read HOOK SECRET)');
  const waitForReceiver = `for i in $(seq 100); do [ "$(grep -c '^verified: ' ${JSON.stringify(receiverLog)} || true)" -ge 2 ] && break; sleep 0.1; done`;
  const body = steps.map((step, i) => `BLOCK=${i}\n${step.script}${i === subscribed ? `\n${startReceiver}` : ''}`).join('\n') + `\n${waitForReceiver}`;
  const script = `${prelude}\n${body.split(PLACEHOLDER_URL).join(baseUrl).split(PLACEHOLDER_KEY).join(key)}`;
  // `require('standardwebhooks')` from the work folder finds the project's packages, as it does
  // for a reader who saves receiver.js in the project's folder
  const env = { ...process.env, NODE_PATH: path.resolve(__dirname, '..', 'node_modules') };
  const result = spawnSync('bash', ['--noprofile', '--norc', '-c', script], { cwd: workDir, env, encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
  const calls: Call[][] = steps.map(() => []);
  const text = fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '';
  for (const line of text.split('\n').filter(Boolean)) {
    const [block, status, ...rest] = line.split(' ');
    calls[Number(block)].push({ status: Number(status), body: rest.join(' ') });
  }
  const received = fs.existsSync(receiverLog) ? fs.readFileSync(receiverLog, 'utf8') : '';
  return { calls, received, output: `${result.stdout}\n${result.stderr}\n--- receiver ---\n${received}`, exit: result.status };
}

/**
 * Where a shown line and an answer differ, field by field, for the fields the line shows (a line
 * is often a jq projection of the answer: only its fields are compared). Values a run makes
 * anew — ids, request ids, secrets, times, names carrying the run's `$RUN`, and sequence numbers
 * (database-wide) — are compared by type; every other value must be the one the README shows.
 */
function differences(shown: unknown, actual: unknown, at = ''): string[] {
  // a line that shows a list answer's items (`jq '[.data[] | …]'`): the subscription's deliveries.
  // Their outcome fields depend on when the README's receiver (`node receiver.js`, which this test
  // runs) answered relative to the listing: they are only checked to be there, and what the
  // receiver printed is checked after the run.
  const listed = (actual as { data?: unknown } | null)?.data;
  if (at === '' && Array.isArray(shown) && Array.isArray(listed)) {
    if (shown.length !== listed.length) return [`shown ${shown.length} items, answered ${listed.length}`];
    return shown.flatMap((item, i) => differences(withoutReceiverOutcome(item), listed[i], `.data[${i}]`));
  }
  if (Array.isArray(shown)) {
    if (!Array.isArray(actual)) return [`${at}: shown an array, answered ${JSON.stringify(actual)}`];
    if (shown.length !== actual.length) return [`${at}: shown ${shown.length} items, answered ${actual.length}`];
    return shown.flatMap((item, i) => differences(item, actual[i], `${at}[${i}]`));
  }
  if (shown !== null && typeof shown === 'object') {
    // a line that shows one item of a list answer (`jq '.data[0] | …'`): the item it matches best
    const items = (actual as { data?: unknown } | null)?.data;
    if (at === '' && Array.isArray(items) && !Object.keys(shown).some((key) => key in (actual as object))) {
      if (items.length === 0) return ['shown an item, answered an empty list'];
      return items.map((item) => differences(shown, item, '.data[]')).reduce((best, d) => (d.length < best.length ? d : best));
    }
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return [`${at}: shown an object, answered ${JSON.stringify(actual)}`];
    return Object.entries(shown).flatMap(([key, value]) =>
      key in actual
        ? RUN_MADE_FIELDS.has(key) ? sameType(value, (actual as Record<string, unknown>)[key], `${at}.${key}`) : differences(value, (actual as Record<string, unknown>)[key], `${at}.${key}`)
        // a field jq made from the answer's run-made values (`ids: [.data[].id]`) is not in it by that name
        : runMade(value) ? [] : [`${at}.${key}: shown, not in the answer`]);
  }
  if (shown === ANY) return [];
  if (typeof shown === 'string' && RUN_MADE_VALUE.test(shown)) return sameType(shown, actual, at);
  // elided where the README leaves a secret out (`whsec_…`): the answer starts the same
  if (typeof shown === 'string' && shown.endsWith('…')) return typeof actual === 'string' && actual.startsWith(shown.slice(0, -1)) ? [] : [`${at}: shown ${JSON.stringify(shown)}, answered ${JSON.stringify(actual)}`];
  return shown === actual ? [] : [`${at}: shown ${JSON.stringify(shown)}, answered ${JSON.stringify(actual)}`];
}

/** A delivery as shown, its outcome fields (what the receiver answered) replaced by "any value". */
function withoutReceiverOutcome(item: unknown): unknown {
  if (item === null || typeof item !== 'object') return item;
  return Object.fromEntries(Object.entries(item).map(([key, value]) => [key, RECEIVER_OUTCOME.has(key) ? ANY : value]));
}
const RECEIVER_OUTCOME = new Set(['status', 'attempts', 'lastResponseStatus']);
/** Matches any answered value (the field must still be in the answer). */
const ANY = Symbol('any value');

function runMade(value: unknown): boolean {
  return typeof value === 'string' ? RUN_MADE_VALUE.test(value) : Array.isArray(value) && value.length > 0 && value.every(runMade);
}

function sameType(shown: unknown, actual: unknown, at: string): string[] {
  return typeof shown === typeof actual && (shown === null) === (actual === null) ? [] : [`${at}: shown ${JSON.stringify(shown)}, answered ${JSON.stringify(actual)}`];
}

/** Fields whose value a run makes anew whatever it looks like. */
const RUN_MADE_FIELDS = new Set(['sequence', 'requestId', 'error']);
/** Ids (`site_…`), request ids, secrets, times, and values carrying a run's `$RUN` (ten digits or more). */
const RUN_MADE_VALUE = /^[a-z]{3,5}_[0-9a-zA-Z_-]{16,}$|^\d{4}-\d{2}-\d{2}(T[\d:.]+Z?)?$|\d{10}/;

/** What the README promises for one call: an error code it shows, or success. */
function expectation(shownLine: string): { code: string } | 'success' {
  const shown = JSON.parse(shownLine) as { code?: unknown; error?: unknown };
  return typeof shown.code === 'string' && typeof shown.error === 'string' ? { code: shown.code } : 'success';
}

describe('README walk-through blocks', () => {
  it('are found, with placeholders a reader fills in once and one shown line per curl call', () => {
    const markdown = fs.readFileSync(README, 'utf8');
    const steps = walkthroughSteps(markdown);
    expect(steps.length).toBeGreaterThan(10);
    const all = steps.map((s) => s.script).join('\n');
    expect(all.split(PLACEHOLDER_KEY)).toHaveLength(2);
    expect(all.split(PLACEHOLDER_URL)).toHaveLength(2);
    // no id of an earlier run is pasted into a command: ids travel in shell variables
    expect(all).not.toMatch(/\b(site|chk|usr|tpl|sch|run|iss|occ|log)_[0-9a-z]{24}\b/);
    // every Idempotency-Key is made unique per run
    const keys = [...all.matchAll(/Idempotency-Key: ([^"']+)/g)].map((m) => m[1]);
    expect(keys.length).toBeGreaterThan(5);
    for (const key of keys) expect(key).toContain('$RUN');
  });
});

describeWithTools('README walk-through run as written', () => {
  describeEachDatabase('twice on one database', (t) => {
    let server: ServerProcess;
    let workDir: string;
    beforeAll(async () => {
      // the webhook part subscribes a receiver on 127.0.0.1, as a developer does locally
      server = await startServerProcess({ databaseUrl: t.db.url, env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
      workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'readme-walkthrough-'));
    }, 60_000);
    afterAll(async () => {
      await server?.stop();
      if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
    });

    it('succeeds at every step, answers the values and errors the README shows, and runs again', async () => {
      const steps = walkthroughSteps(fs.readFileSync(README, 'utf8'));
      const key = t.auth.replace(/^Bearer /, '');
      const firstIds: string[] = [];
      for (const round of [1, 2]) {
        // the receiver's port: never a 9000 another program holds
        const run = runWalkthrough(steps, server.baseUrl, key, workDir, round, await freePort());
        if (run.exit !== 0) throw new Error(`walk-through round ${round} exited ${run.exit}:\n${run.output}\n--- server ---\n${server.output()}`);
        steps.forEach((step, i) => {
          const calls = run.calls[i];
          expect({ block: i, calls: calls.length }).toEqual({ block: i, calls: step.shown.length });
          calls.forEach((call, j) => {
            const expected = expectation(step.shown[j]);
            const context = { round, block: i, call: j, status: call.status, body: call.body };
            // the values the README shows are the values a reader gets
            expect({ ...context, differences: differences(JSON.parse(step.shown[j]), parseOrText(call.body)) }).toEqual({ ...context, differences: [] });
            if (expected === 'success') {
              expect({ ...context, ok: call.status >= 200 && call.status < 300 }).toEqual({ ...context, ok: true });
            } else {
              expect({ ...context, code: (JSON.parse(call.body) as { code: string }).code, is4xx: call.status >= 400 && call.status < 500 })
                .toEqual({ ...context, code: expected.code, is4xx: true });
            }
          });
        });
        // the README's receiver verified both events with standardwebhooks and printed them as shown
        // (a second run's receiver also refuses the first run's subscription, signed with another secret)
        // (in either order: deliveries go out concurrently, docs/webhooks.md)
        const verified = run.received.split('\n').filter((line) => line.startsWith('verified: ')).sort();
        expect({ round, verified }).toEqual({ round, verified: [
          expect.stringMatching(/^verified: checkin\.activated sequence \d+ status active$/),
          expect.stringMatching(/^verified: checkin\.created sequence \d+ status pre_checkin$/),
        ] });
        expect(run.received).toMatch(/^evt_[0-9a-z]{24} v1,[A-Za-z0-9+/=]{44}$/m);
        const ids = run.calls.flat().map((c) => { try { return (JSON.parse(c.body) as { id?: string }).id; } catch { return undefined; } }).filter((id): id is string => !!id);
        if (round === 1) firstIds.push(...ids);
        else expect(ids.filter((id) => firstIds.includes(id))).toEqual([]);
      }
    }, 240_000);
  });
});
