import { testDatabases, warnIfPostgresSkipped, TestDatabase } from './support/databases';
import { findIdempotencyKey, insertClaimIfAbsent, IdempotencyRow } from '../runtime/storage/repositories/idempotencyKeysRepository';

// The statements every request runs go straight through the driver as fixed texts, prepared once
// per connection (runtime/storage/database.ts: on Postgres, named prepared statements). A
// prepared statement must keep its result type, so these texts name their columns: a migration
// that adds a column while a server runs must not break that server's statements.

warnIfPostgresSkipped();

const row: IdempotencyRow = {
  api_key_id: 'key_fixedstatements00000000',
  idempotency_key: 'k1',
  fingerprint: 'f'.repeat(64),
  state: 'in_progress',
  lock_token: 'token',
  locked_until: '2099-01-01T00:00:00.000Z',
  response_status: null,
  response_headers: null,
  response_body: null,
  created_at: '2026-01-01T00:00:00.000Z',
  expires_at: '2099-01-01T00:00:00.000Z',
};

describe.each(testDatabases)('fixed statements on $name', (kind) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await kind.create();
  });
  afterAll(async () => {
    await db.destroy();
  });

  it('a statement prepared before a column was added still runs, on the same connections, and answers the same row', async () => {
    expect(await insertClaimIfAbsent(db.knex, row)).toBe(true);
    expect(await insertClaimIfAbsent(db.knex, row)).toBe(false); // the prepared text again: a conflict
    // every pooled connection prepares it (Postgres pools several): run it more times than the pool has connections
    const before = await Promise.all(Array.from({ length: 12 }, () => findIdempotencyKey(db.knex, row.api_key_id, row.idempotency_key)));
    expect(before[0]).toEqual(row);

    await db.knex.schema.alterTable('idempotency_keys', (t) => t.string('added_later', 10));

    const after = await Promise.all(Array.from({ length: 12 }, () => findIdempotencyKey(db.knex, row.api_key_id, row.idempotency_key)));
    expect(after).toEqual(before);
  });
});
