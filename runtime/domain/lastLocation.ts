import { Knex } from 'knex';
import { invalidField, notFound } from '../errors';
import { findUser, StoredCoordinate, updateUser, User, UserUpdate } from '../storage/repositories/usersRepository';

/**
 * A PATCH of a user profile's last location. Any subset of the fields may be sent; what is kept
 * paired is the stored location: a latitude without a longitude (or the reverse) is no position,
 * so a change that would leave the profile with only one answers 400 naming the missing one.
 * Decided against the stored row in the update statement itself, and only after the profile is
 * known to exist, so an unknown id is always 404.
 */
export async function updateLastLocation(db: Knex, orgId: string, id: string, changes: UserUpdate): Promise<User> {
  const lat = changes.lastLocationLat;
  const lng = changes.lastLocationLng;
  if (lat !== undefined && lng !== undefined) {
    if ((lat === null) !== (lng === null)) {
      if (!(await findUser(db, orgId, id))) throw notFound('user profile', id);
      const cleared = lat === null ? 'lastLocationLat' : 'lastLocationLng';
      const other = lat === null ? 'lastLocationLng' : 'lastLocationLat';
      throw invalidField(`/${cleared}`, `must not be null while ${other} is set: a location has both coordinates or neither`);
    }
    return orNotFound(await updateUser(db, orgId, id, changes), id);
  }
  if (lat === undefined && lng === undefined) return orNotFound(await updateUser(db, orgId, id, changes), id);

  const sent = lat !== undefined ? 'lastLocationLat' : 'lastLocationLng';
  const sentValue = lat !== undefined ? lat : lng;
  // the coordinate not sent must be stored when one is set, and absent when one is cleared
  const other: StoredCoordinate = { field: sent === 'lastLocationLat' ? 'lastLocationLng' : 'lastLocationLat', stored: sentValue !== null };
  const updated = await updateUser(db, orgId, id, changes, other);
  if (updated) return updated;
  if (!(await findUser(db, orgId, id))) throw notFound('user profile', id);
  throw invalidField(
    `/${other.field}`,
    other.stored
      ? `is required: the profile has no ${other.field} stored, and ${sent} alone is no location`
      : `must be cleared too (send it as null): ${sent} is cleared and a location has both coordinates or neither`,
  );
}

function orNotFound(user: User | undefined, id: string): User {
  if (!user) throw notFound('user profile', id);
  return user;
}
