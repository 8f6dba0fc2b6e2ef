import { Knex } from 'knex';
import { alreadyExists, invalidField, notFound } from '../errors';
import { UniqueViolation } from '../storage/databaseErrors';
import * as users from '../storage/repositories/usersRepository';
import type { CheckinLocation, StoredCoordinate, User, UserCreate, UserUpdate } from '../storage/repositories/usersRepository';
import { finishUpdate, recordEvent, recordUpdate } from './events';
import { assertBothOrNeither } from './geofence';

/**
 * Every write of a user profile made through the API. `trx` is the request's transaction; each
 * returns the profile as GET shows it and records its event last. A check-in also refreshes the
 * profile's last location, in the same transaction (runtime/domain/checkins.ts), which records
 * that change as `user.updated` after the check-in's own event.
 */

/** One profile per external userId within an organization: a second one is 409 ALREADY_EXISTS. */
export async function createUser(trx: Knex, orgId: string, body: UserCreate): Promise<User> {
  let user: User;
  try {
    user = await users.insertUser(trx, orgId, body);
  } catch (err) {
    if (err instanceof UniqueViolation) throw alreadyExists(`A user profile for userId ${body.userId} already exists`);
    throw err;
  }
  await recordEvent(trx, orgId, { type: 'user.created', data: user });
  return user;
}

/**
 * A PATCH of the profile's last location. Any subset of the fields may be sent; what is kept
 * paired is the stored location: a latitude without a longitude (or the reverse) is no position,
 * so a change that would leave the profile with only one answers 400 naming the missing one.
 * Decided against the stored row in the update statement itself, so a concurrent write cannot
 * slip in between; an unknown id is always 404.
 */
export async function updateUser(trx: Knex, orgId: string, id: string, changes: UserUpdate): Promise<User> {
  const before = await users.findUserForUpdate(trx, orgId, { id });
  if (!before) throw notFound('user profile', id);
  const lat = changes.lastLocationLat;
  const lng = changes.lastLocationLng;
  assertBothOrNeither(['lastLocationLat', lat], ['lastLocationLng', lng]);
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
  const after = (await users.findUser(trx, orgId, id))!;
  return finishUpdate(trx, orgId, 'user.updated', before, after, (at) => users.restoreUserUpdatedAt(trx, orgId, id, at));
}

/** A profile before and after a write that leaves recording its event to the caller. */
export interface UserChange {
  before: User;
  after: User;
}

/**
 * Replaces the last location of a profile from a check-in. `before` is the profile as the caller
 * read it with its lock in this transaction (usersRepository.findUserForUpdate). The check-in
 * records the change (`recordUserChange`) after its own event, so that a consumer sees the
 * check-in before the location it moved.
 */
export async function refreshLastLocation(trx: Knex, orgId: string, before: User, location: CheckinLocation): Promise<UserChange> {
  await users.refreshLastLocation(trx, orgId, before.userId, location);
  return { before, after: (await users.findUser(trx, orgId, before.id))! };
}

/** Records `user.updated` for a change `refreshLastLocation` made; nothing when nothing changed. */
export async function recordUserChange(trx: Knex, orgId: string, change: UserChange | undefined): Promise<void> {
  if (change) await recordUpdate(trx, orgId, 'user.updated', change.before, change.after);
}
