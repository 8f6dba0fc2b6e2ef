/**
 * `npm run generate`: contract/ → generated/ (and stubs in handlers/).
 *
 *   generated/openapi.json        the bundled OpenAPI 3.1 document (served at /openapi.json)
 *   generated/openapi-sdk.json    its OpenAPI 3.0.3 rendering (served at /openapi-sdk.json)
 *   generated/types.ts            TypeScript types (openapi-typescript), as the handlers see requests
 *   generated/client-types.ts     the same for API clients (fields with defaults optional)
 *   generated/operations.ts       operationId → method, path, scopes, deprecation
 *   generated/handlers.ts         operationId → handlers/<operationId>.ts
 *   generated/validators/*.js     standalone Ajv (JSON Schema 2020-12) validators
 *
 * `--out DIR` writes the generated files into DIR instead and creates no stubs: the
 * staleness test (test/generated.test.ts) regenerates into a temporary folder and diffs.
 * The output depends only on contract/ and the pinned tool versions, never on time or order
 * of the file system listing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { buildContract } from './contract/bundle';
import { buildOperationIndex, renderOperationIndex, renderHandlerRegistry, renderHandlerStub } from './contract/operations';
import { renderValidators } from './contract/validators';
import { toOpenApi30 } from './contract/downConvert';
import { renderTypes } from './contract/types';

const root = path.resolve(__dirname, '..');

async function main(): Promise<void> {
  const outArg = process.argv.indexOf('--out');
  const outDir = outArg >= 0 ? path.resolve(process.argv[outArg + 1]) : path.join(root, 'generated');
  const writeStubs = outArg < 0;

  const doc = buildContract(path.join(root, 'contract'));
  const index = buildOperationIndex(doc);

  const files: Record<string, string> = {
    'openapi.json': json(doc),
    'openapi-sdk.json': json(toOpenApi30(doc)),
    'types.ts': await renderTypes(doc, 'server'),
    'client-types.ts': await renderTypes(doc, 'clients'),
    'operations.ts': renderOperationIndex(index),
    'handlers.ts': renderHandlerRegistry(index),
    ...renderValidators(doc, index),
  };

  fs.rmSync(path.join(outDir, 'validators'), { recursive: true, force: true });
  for (const [name, content] of Object.entries(files)) {
    const file = path.join(outDir, name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
  }

  if (writeStubs) {
    for (const op of index) {
      const file = path.join(root, 'handlers', `${op.operationId}.ts`);
      if (!fs.existsSync(file)) {
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, renderHandlerStub(op.operationId));
        console.log(`stub: handlers/${op.operationId}.ts`);
      }
    }
  }
  console.log(`generated ${Object.keys(files).length} files for ${index.length} operations into ${path.relative(root, outDir) || '.'}`);
}

function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + '\n';
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
