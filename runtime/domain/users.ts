import { Knex } from 'knex';
import { alreadyExists, invalidField, notFound } from '../errors';
import { UniqueViolation } from '../storage/databaseErrors';
import * as users from '../storage/repositories/usersRepository';
import type { CheckinLocation, StoredCoordinate, User, UserCreate, UserUpdate } from '../storage/repositories/usersRepository';

/**
 * Every write of a user profile made through the API. `trx` is the request's transaction; each
 * returns the profile as GET shows it. A check-in also refreshes the profile's last location,
 * in the same transaction (runtime/domain/checkins.ts).
 */

/** One profile per external userId within an organization: a second one is 409 ALREADY_EXISTS. */
export async function createUser(trx: Knex, orgId: string, body: UserCreate): Promise<User> {
  try {
    return await users.insertUser(trx, orgId, body);
  } catch (err) {
    if (err instanceof UniqueViolation) throw alreadyExists(`A user profile for userId ${body.userId} already exists`);
    throw err;
  }
}

/**
 * A PATCH of the profile's last location. Any subset of the fields may be sent; what is kept
 * paired is the stored location: a latitude without a longitude (or the reverse) is no position,
 * so a change that would leave the profile with only one answers 400 naming the missing one.
 * Decided against the stored row in the update statement itself, so a concurrent write cannot
 * slip in between; an unknown id is always 404.
 */
export async function updateUser(trx: Knex, orgId: string, id: string, changes: UserUpdate): Promise<User> {
  const before = await users.findUser(trx, orgId, id);
  if (!before) throw notFound('user profile', id);
  const lat = changes.lastLocationLat;
  const lng = changes.lastLocationLng;
  if (lat !== undefined && lng !== undefined && (lat === null) !== (lng === null)) {
    const cleared = lat === null ? 'lastLocationLat' : 'lastLocationLng';
    const other = lat === null ? 'lastLocationLng' : 'lastLocationLat';
    throw invalidField(`/${cleared}`, `must not be null while ${other} is set: a location has both coordinates or neither`);
  }
  // one coordinate sent alone: the other must be stored when it is set, and absent when it is cleared
  const onlySent = (lat === undefined) === (lng === undefined) ? undefined : lat !== undefined ? 'lastLocationLat' : 'lastLocationLng';
  const guard: StoredCoordinate | undefined = onlySent && {
    field: onlySent === 'lastLocationLat' ? 'lastLocationLng' : 'lastLocationLat',
    stored: (onlySent === 'lastLocationLat' ? lat : lng) !== null,
  };
  if (!(await users.updateUser(trx, orgId, id, changes, guard))) {
    if (!guard || !(await users.findUser(trx, orgId, id))) throw notFound('user profile', id);
    throw invalidField(
      `/${guard.field}`,
      guard.stored
        ? `is required: the profile has no ${guard.field} stored, and ${onlySent} alone is no location`
        : `must be cleared too (send it as null): ${onlySent} is cleared and a location has both coordinates or neither`,
    );
  }
  return (await users.findUser(trx, orgId, id))!;
}

/** Replaces the last location of `userId`'s profile from a check-in; nothing when there is no profile. */
export async function refreshLastLocation(trx: Knex, orgId: string, userId: string, location: CheckinLocation): Promise<void> {
  await users.refreshLastLocation(trx, orgId, userId, location);
}
