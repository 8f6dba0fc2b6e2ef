import { takeContractViolations, recordResponse } from './contractCheck';

/**
 * Every response received in a test must be one the contract describes (contractCheck.ts).
 * testClient records what it sends; this hook also records what a test sends with supertest
 * directly, so no HTTP test can step around the check. (Clients that use fetch, such as the
 * SDK tests, hand their exchanges to recordExchange themselves.)
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const SupertestTest: { prototype: { end(this: SupertestRequest, fn?: unknown): unknown } } = require('supertest/lib/test');
interface SupertestRequest {
  method: string;
  url: string;
  once(event: 'response', listener: (res: never) => void): void;
}
const end = SupertestTest.prototype.end;
SupertestTest.prototype.end = function (this: SupertestRequest, fn?: unknown) {
  this.once('response', (res) => recordResponse(this.method, this.url, res));
  return end.call(this, fn);
};

afterEach(() => {
  const problems = takeContractViolations();
  if (problems.length) throw new Error(`Responses that do not match the contract:\n${problems.join('\n')}`);
});
