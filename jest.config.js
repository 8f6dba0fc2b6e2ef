// Jest is 29, not 30: jest 30 resolves through unrs-resolver, whose per-platform optional
// packages npm 11 leaves out of package-lock.json, and `npm ci` then refuses the lock file.
// jest-util is a direct devDependency because ts-jest requires it as a peer that npm does not place.
// TypeScript is pinned to 5.9 because ts-jest's peer range is `typescript >=4.3 <7` and
// typescript@latest is the 7.x native compiler. Tests are transpiled only
// (isolatedModules in tsconfig.json): type checking is `tsc --noEmit`, the first step of `npm test`.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: false }] },
  setupFilesAfterEnv: ['<rootDir>/test/support/setup.ts'],
  testTimeout: 30000,
  maxWorkers: 2,
};
