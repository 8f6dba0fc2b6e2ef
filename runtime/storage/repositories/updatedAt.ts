import { Knex } from 'knex';

/** The tables whose rows an update writes before reading the resource back (domain/events.ts, finishUpdate). */
export type UpdatedInPlace = 'sites' | 'assets' | 'schedules' | 'users';

/**
 * Sets a row's `updated_at` back to what it was: an update that turned out to change no field
 * leaves the resource exactly as it was, its `updatedAt` included (domain/events.ts, finishUpdate).
 */
export async function restoreUpdatedAt(db: Knex, table: UpdatedInPlace, orgId: string, id: string, updatedAt: string): Promise<void> {
  await db(table).where({ org_id: orgId, id }).update({ updated_at: updatedAt });
}
