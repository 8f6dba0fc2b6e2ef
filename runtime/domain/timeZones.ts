import { invalidField } from '../errors';

/** True for an IANA time zone name the runtime's ICU data knows (`Europe/London`, `UTC`). */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Throws 400 VALIDATION_ERROR naming `pointer` when `name` is not an IANA time zone. */
export function assertTimeZone(name: string, pointer: string): void {
  if (!isTimeZone(name)) throw invalidField(pointer, `must be an IANA time zone name such as Europe/London (got ${JSON.stringify(name)})`);
}
