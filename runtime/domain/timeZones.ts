import { invalidField } from '../errors';

/**
 * Time zone `name` as it is stored and shown: in the letter case of the runtime's own name for
 * the zone when `name` is that name in another case (`EUROPE/LONDON` is `Europe/London`, `utc` is
 * `UTC`), otherwise as sent. A link is not replaced by what the runtime resolves it to: its ICU
 * data names renamed zones by their old names (`Asia/Kolkata` would become `Asia/Calcutta`), and
 * that differs between runtimes. Throws 400 VALIDATION_ERROR naming `pointer` when `name` is not
 * an IANA time zone.
 */
export function storedTimeZone(name: string, pointer: string): string {
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    throw invalidField(pointer, `must be an IANA time zone name such as Europe/London (got ${JSON.stringify(name)})`);
  }
  return resolved.toLowerCase() === name.toLowerCase() ? resolved : name;
}
