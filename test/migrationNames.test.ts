import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { migrationNames } from '../runtime/storage/migrate';

// A migration file named off the pattern used to be skipped without a word: its table or column
// never came, on any database. Now the migration run stops and names it.
describe('migration files', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-migrations-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const files = (...names: string[]) => {
    for (const name of fs.readdirSync(dir)) fs.rmSync(path.join(dir, name));
    for (const name of names) fs.writeFileSync(path.join(dir, name), '');
  };

  it('are read in order; compiled leftovers (declarations, source maps) are not migrations', () => {
    files('0002_b.js', '0001_a.js', '0001_a.js.map', '0001_a.d.ts', 'README.md');
    expect(migrationNames(dir)).toEqual(['0001_a', '0002_b']);
  });

  it('a misnamed one stops the run, named, instead of being skipped', () => {
    for (const bad of ['0018_assetNotes.ts', '17_foo.ts', 'add_column.js', '0018-asset-notes.ts']) {
      files('0001_a.ts', bad);
      expect(() => migrationNames(dir)).toThrow(`${bad} in ${dir}: name a migration <4 digits>_<lower_case_words>.ts`);
    }
  });

  it('run from dist/, the sources name the migrations: a compiled file whose source was renamed or removed is left alone', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-build-'));
    try {
      const sources = path.join(root, 'runtime', 'storage', 'migrations');
      const compiled = path.join(root, 'dist', 'runtime', 'storage', 'migrations');
      fs.mkdirSync(sources, { recursive: true });
      fs.mkdirSync(compiled, { recursive: true });
      for (const name of ['0001_a.ts', '0002_b.ts']) fs.writeFileSync(path.join(sources, name), '');
      // left by earlier builds: a migration renamed since, and a misnamed one renamed since
      for (const name of ['0001_a.js', '0001_a.js.map', '0002_b.js', '0002_old_name.js', '0018_assetNotes.js']) fs.writeFileSync(path.join(compiled, name), '');
      expect(migrationNames(compiled)).toEqual(['0001_a', '0002_b']);
      fs.rmSync(path.join(compiled, '0002_b.js'));
      expect(() => migrationNames(compiled)).toThrow(`0002_b in ${sources} not compiled into ${compiled}: run npm run build`);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('the project\'s own are all named right', () => {
    expect(migrationNames(path.join(__dirname, '..', 'runtime', 'storage', 'migrations')).length).toBeGreaterThanOrEqual(17);
  });
});
