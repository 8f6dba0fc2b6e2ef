import fs from 'node:fs';
import path from 'node:path';
import { operations } from '../generated/operations';
import { handlers } from '../generated/handlers';
import { checkHandlerRegistry, defineHandler, type AnyHandler } from '../runtime/http/handler';

// The contract, the generated registry and handlers/ must agree, with nothing left half done:
// a mistake in any of them used to pass the type check and show only when a test called the
// operation, if one did (docs/architecture.md, "Adding an operation").
const HANDLERS_DIR = path.join(__dirname, '..', 'handlers');
const handlerFiles = fs.readdirSync(HANDLERS_DIR).filter((f) => f.endsWith('.ts')).map((f) => f.replace(/\.ts$/, ''));

describe('handlers', () => {
  it('a handler registered under another operation than the one it was defined for stops the server from loading', () => {
    const copied = defineHandler('getSite', async () => ({ status: 200 as const, body: undefined as never }));
    expect(() => checkHandlerRegistry({ listSites: copied as AnyHandler })).toThrow("handlers/listSites.ts defines defineHandler('getSite', …): it must name 'listSites', the operation it serves");
    expect(() => checkHandlerRegistry(handlers)).not.toThrow();
    // …and the server runs that check as it loads the operation pipeline
    jest.isolateModules(() => {
      jest.doMock('../generated/handlers', () => ({ handlers: { ...handlers, listSites: copied } }));
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      expect(() => require('../runtime/http/operationPipeline')).toThrow("handlers/listSites.ts defines defineHandler('getSite', …)");
    });
    jest.dontMock('../generated/handlers');
  });

  it('each file in handlers/ serves an operation of the contract (a renamed operationId leaves none behind)', () => {
    expect(handlerFiles.filter((name) => !(name in operations))).toEqual([]);
    expect(handlerFiles.length).toBe(Object.keys(operations).length);
  });

  it('no operation is still the stub that answers 501 NOT_IMPLEMENTED', () => {
    const stubs = handlerFiles.filter((name) => fs.readFileSync(path.join(HANDLERS_DIR, `${name}.ts`), 'utf8').includes('notImplemented('));
    expect(stubs).toEqual([]);
  });
});
