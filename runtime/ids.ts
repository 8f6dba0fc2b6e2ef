import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

/**
 * A new opaque identifier: a short type prefix and 24 base32 characters (120 random bits),
 * so ids are never reused and reveal nothing about order or volume.
 */
export function newId(prefix: string): string {
  const bytes = randomBytes(24);
  let out = prefix + '_';
  for (let i = 0; i < 24; i++) out += ALPHABET[bytes[i] & 31];
  return out;
}
