import { Knex } from 'knex';
import { notFound } from '../errors';
import { findSchedule } from '../storage/repositories/schedulesRepository';
import { resolveStartsAt } from './recurrence';

/**
 * The local `startsAt` a schedule update stores, or undefined when none was sent. An instant sent
 * with an offset is read in the time zone the schedule will have: the one sent alongside, else the
 * stored one (so only then is the schedule read first; an unknown id is 404).
 */
export async function startsAtForUpdate(
  db: Knex,
  orgId: string,
  id: string,
  changes: { startsAt?: string; timezone?: string },
): Promise<string | undefined> {
  if (changes.startsAt === undefined) return undefined;
  const zone = changes.timezone ?? (await findSchedule(db, orgId, id))?.timezone;
  if (zone === undefined) throw notFound('schedule', id);
  return resolveStartsAt(changes.startsAt, zone, '/startsAt');
}
