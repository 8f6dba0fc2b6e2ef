import { takeContractViolations } from './contractCheck';

// Every response received in a test must be one the contract describes (contractCheck.ts).
afterEach(() => {
  const problems = takeContractViolations();
  if (problems.length) throw new Error(`Responses that do not match the contract:\n${problems.join('\n')}`);
});
