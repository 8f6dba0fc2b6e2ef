import { randomFillSync, randomUUID } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case
/** Characters after the prefix. */
const ID_CHARS = 24;

/**
 * Random bytes are drawn from the CSPRNG 4 KB at a time and handed out once each (node's own
 * randomUUID does the same): one system call per ~170 ids instead of one per id, which the
 * write path's profile showed as its largest single cost outside the database and HTTP.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomChars(count: number): string {
  if (poolOffset + count > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  let out = '';
  for (let i = 0; i < count; i++) out += ALPHABET[pool[poolOffset + i] & 31];
  poolOffset += count;
  return out;
}

/** Characters of an id that carry its creation time (milliseconds, 50 bits: good for 35 000 years). */
const TIME_CHARS = 10;
/** The random characters after them (70 bits). */
const RANDOM_CHARS = ID_CHARS - TIME_CHARS;

let lastMs = -1;
let lastTime = '';

/** `Date.now()` as TIME_CHARS base32 characters; the alphabet is in ASCII order, so later sorts later. */
function timeChars(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    let rest = ms;
    let out = '';
    for (let i = 0; i < TIME_CHARS; i++) {
      out = ALPHABET[rest % 32] + out;
      rest = Math.floor(rest / 32);
    }
    lastMs = ms;
    lastTime = out;
  }
  return lastTime;
}

/**
 * A new opaque identifier: a short type prefix and 24 base32 characters — the creation time in
 * milliseconds (10) and 70 random bits (14). Ids are never reused and reveal nothing about
 * volume; they do reveal when the resource was made, which its `createdAt` says anyway to
 * whoever can see the id. Clients must treat them as opaque (docs/architecture.md, "Representation").
 * Time first so that a table's new rows land at the end of its unique index instead of on a
 * random page of it: on SQLite a random position costs a page read when the index outgrew the
 * cache and a page of WAL at every commit (bench/README.md).
 */
export function newId(prefix: string): string {
  return `${prefix}_${timeChars()}${randomChars(RANDOM_CHARS)}`;
}

/** `count` identifiers of the same shape for rows written together (a sensor batch): one time, each its own random part. */
export function newIdBatch(prefix: string, count: number): string[] {
  const shared = `${prefix}_${timeChars()}`;
  return Array.from({ length: count }, () => shared + randomChars(RANDOM_CHARS));
}

/**
 * When the id of this prefix was made (milliseconds since the epoch), read from its time
 * characters; undefined when `id` does not have newId's shape. Only the server reads it (to tell
 * an id older than a retention from one that never existed); clients treat ids as opaque.
 */
export function idCreatedAt(id: string, prefix: string): number | undefined {
  if (id.length !== prefix.length + 1 + ID_CHARS || !id.startsWith(`${prefix}_`)) return undefined;
  let ms = 0;
  for (let i = 0; i < ID_CHARS; i++) {
    const digit = ALPHABET.indexOf(id[prefix.length + 1 + i]);
    if (digit < 0) return undefined;
    if (i < TIME_CHARS) ms = ms * 32 + digit;
  }
  return ms;
}

/** A request's id (`req_` and 20 hex characters): in its log line, its `X-Request-Id` and an error body. */
export function newRequestId(): string {
  return `req_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
}
