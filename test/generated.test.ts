import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { validators } from '../generated/validators';
import { describeEachDatabase, anError } from './support/testApp';

const root = path.resolve(__dirname, '..');
const generatedDir = path.join(root, 'generated');

/** Every file under `dir`, relative to it, sorted. */
function listFiles(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

async function generateInto(dir: string): Promise<void> {
  await promisify(execFile)(process.execPath, [path.join(root, 'node_modules/tsx/dist/cli.mjs'), 'scripts/generate.ts', '--out', dir], { cwd: root, timeout: 60_000 });
}

/**
 * generated/ is committed (README, "Changing the contract"): a contract change shows in review, and this
 * test fails when someone edits contract/ without running `npm run generate`, or edits
 * generated/ by hand.
 */
describe('generated/', () => {
  let tmp: string;
  let first: string;
  let second: string;

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fieldops-generate-'));
    first = path.join(tmp, 'first');
    second = path.join(tmp, 'second');
    await Promise.all([generateInto(first), generateInto(second)]);
  }, 90_000);
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('is what `npm run generate` writes from contract/ (run it and commit the result when this fails)', () => {
    const committed = listFiles(generatedDir);
    expect(listFiles(first)).toEqual(committed);
    const stale = committed.filter((file) => !fs.readFileSync(path.join(first, file)).equals(fs.readFileSync(path.join(generatedDir, file))));
    expect(stale).toEqual([]);
  });

  it('is deterministic: two runs write identical files', () => {
    const files = listFiles(first);
    expect(listFiles(second)).toEqual(files);
    expect(files.filter((file) => !fs.readFileSync(path.join(first, file)).equals(fs.readFileSync(path.join(second, file))))).toEqual([]);
  });

  it('builds the validators with JSON Schema 2020-12 (ajv/dist/2020), not draft-07', () => {
    expect(fs.readFileSync(path.join(root, 'scripts/contract/validators.ts'), 'utf8')).toMatch(/from 'ajv\/dist\/2020'/);
    // standalone code from Ajv2020 threads `dynamicAnchors` (2020-12 $dynamicRef) through every function
    for (const file of ['requests.js', 'params.js', 'responses.js']) {
      expect(fs.readFileSync(path.join(generatedDir, 'validators', file), 'utf8')).toContain('dynamicAnchors');
    }
    const validate = validators.createSite.body!;
    expect(validate({ name: 'X', latitude: 1 })).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ keyword: 'dependentRequired', params: expect.objectContaining({ missingProperty: 'longitude' }) })]);
    expect(validate({ name: 'X', latitude: 1, longitude: 2 })).toBe(true);
  });
});

describeEachDatabase('a 2020-12-only keyword in the contract is enforced at the HTTP boundary', (t) => {
  it('POST /v1/sites with latitude but no longitude answers 400 (dependentRequired)', async () => {
    const res = await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Half a location', latitude: 53.8 }).expect(400);
    expect(res.body).toEqual(anError('VALIDATION_ERROR', { details: [{ path: '/longitude', message: expect.any(String) }] }));
    expect(await t.db.knex('sites').where({ name: 'Half a location' })).toHaveLength(0);
  });
});

describe('the handler registry', () => {
  it('gives a prepare step only to writes (a read never runs one: http/operationPipeline.ts)', async () => {
    const { handlers } = await import('../generated/handlers');
    const { operations } = await import('../generated/operations');
    const withPrepare = Object.entries(handlers).filter(([, handler]) => handler.prepare).map(([id]) => id);
    expect(withPrepare).toContain('createIntegrationSubscription');
    for (const id of withPrepare) expect(['post', 'patch', 'put', 'delete']).toContain(operations[id as keyof typeof operations].method);
  });
});
