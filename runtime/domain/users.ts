import { Knex } from 'knex';
import { alreadyExists, notFound } from '../errors';
import { UniqueViolation } from '../storage/databaseErrors';
import * as users from '../storage/repositories/usersRepository';
import type { CheckinLocation, User, UserCreate, UserUpdate } from '../storage/repositories/usersRepository';

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

export async function updateUser(trx: Knex, orgId: string, id: string, changes: UserUpdate): Promise<User> {
  const before = await users.findUser(trx, orgId, id);
  if (!before || !(await users.updateUser(trx, orgId, id, changes))) throw notFound('user profile', id);
  return (await users.findUser(trx, orgId, id))!;
}

/** Replaces the last location of `userId`'s profile from a check-in; nothing when there is no profile. */
export async function refreshLastLocation(trx: Knex, orgId: string, userId: string, location: CheckinLocation): Promise<void> {
  await users.refreshLastLocation(trx, orgId, userId, location);
}
