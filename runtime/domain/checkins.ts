import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { invalidField, invalidTransition, notFound } from '../errors';
import { normalizeTimestamp, nowIso } from '../time';
import { geofenceVerdict, GeofenceVerdict, NO_VERDICT, PreviousLocation } from './geofence';
import { Checkin, CheckinStatus, findCheckin, insertCheckin, saveCheckinIfUnchanged } from '../storage/repositories/checkinsRepository';
import { findSite } from '../storage/repositories/sitesRepository';
import { findUserForReference, findUserForUpdate, LastLocationSource, User } from '../storage/repositories/usersRepository';
import { recordUserChange, refreshLastLocation, UserChange } from './users';
import { changesAnything, recordEvent, recordUpdate } from './events';

/**
 * Every write of a check-in, and its lifecycle (docs/architecture.md, "Product rules"):
 * `pre_checkin → active → checked_out`, the server-set times, the geofence verdict and the
 * refresh of the user's last location. Every write goes through the `db` it is given: the
 * request's transaction, so the check-in and the profile refresh commit (or roll back) together.
 * Events come last: the check-in's, then `user.updated` when its last location moved.
 */

type CheckinCreate = components['schemas']['CheckinCreate'];
type CheckinUpdate = components['schemas']['CheckinUpdate'];
type Coordinates = components['schemas']['Coordinates'];

const NEXT_STATUS: Record<CheckinStatus, CheckinStatus | null> = { pre_checkin: 'active', active: 'checked_out', checked_out: null };

/** Staying put is allowed (it updates addresses/coordinates); otherwise only one step forward. */
export function canMove(from: CheckinStatus, to: CheckinStatus): boolean {
  return from === to || NEXT_STATUS[from] === to;
}

export async function createCheckin(db: Knex, orgId: string, input: CheckinCreate): Promise<Checkin> {
  const startAt = input.arrivalWindowStartAt === undefined ? null : normalizeTimestamp(input.arrivalWindowStartAt);
  const endAt = input.arrivalWindowEndAt === undefined ? null : normalizeTimestamp(input.arrivalWindowEndAt);
  if (startAt !== null && endAt !== null && endAt < startAt) {
    throw invalidField('/arrivalWindowEndAt', 'must not be before arrivalWindowStartAt');
  }
  const status = input.status ?? 'pre_checkin';
  const coordinates = input.coordinates ? withAccuracy(input.coordinates) : null;
  // read before the time is taken: see profileOf
  const profile = status === 'active' || coordinates ? await profileOf(db, orgId, input.userId, true) : undefined;
  const now = nowIso();
  const checkedInAt = status === 'active' ? now : null;

  const checkin = await insertCheckin(db, orgId, {
    userId: input.userId,
    siteId: input.siteId,
    status,
    arrivalWindowStartAt: startAt,
    arrivalWindowEndAt: endAt,
    coordinates,
    checkInAddress: input.checkInAddress ?? null,
    checkOutAddress: null,
    checkedInAt,
    checkedOutAt: null,
    ...(coordinates
      ? await verdictFor(db, orgId, { siteId: input.siteId, coordinates, checkedInAt, arrivalWindowStartAt: startAt, arrivalWindowEndAt: endAt }, profile, now)
      : NO_VERDICT),
    updatedAt: now,
  });

  // a walk-in is an activation; a planned check-in with a position is a "created" location
  const userChange =
    status === 'active' ? await refreshProfile(db, orgId, profile, checkin, 'site_checkin_activated', now)
    : coordinates ? await refreshProfile(db, orgId, profile, checkin, 'site_checkin_created', now)
    : undefined;
  await recordEvent(db, orgId, { type: 'checkin.created', data: checkin });
  await recordUserChange(db, orgId, userChange);
  return checkin;
}

/**
 * Applies `changes` to the check-in as it is now. The write is a compare-and-set on what was read
 * (saveCheckinIfUnchanged): when another write committed in between (Postgres; SQLite runs one
 * write of a process at a time), the change is applied again to the check-in as that write left
 * it — so a check-out and a concurrent re-send of `active` both keep their change, and a re-send
 * that comes after a check-out is refused as the transition it has become.
 */
export async function updateCheckin(db: Knex, orgId: string, id: string, changes: CheckinUpdate): Promise<Checkin> {
  for (let attempt = 1; ; attempt++) {
    const saved = await tryUpdateCheckin(db, orgId, id, changes);
    if (saved) return saved;
    if (attempt === 3) throw invalidTransition('The check-in changed three times while this request was applying its change; read it again and retry');
  }
}

/** One attempt of updateCheckin: the updated check-in, or undefined when it changed meanwhile. */
async function tryUpdateCheckin(db: Knex, orgId: string, id: string, changes: CheckinUpdate): Promise<Checkin | undefined> {
  const current = await findCheckin(db, orgId, id);
  if (!current) throw notFound('checkin', id);
  const status = changes.status ?? current.status;
  if (!canMove(current.status, status)) throw invalidTransition(`A check-in cannot move from ${current.status} to ${status}`);

  const activating = current.status !== 'active' && status === 'active';
  // a verdict describes a reported position: recomputed when one is reported, and at
  // activation, when the arrival window starts to matter (the profile read before the time is
  // taken: see profileOf)
  const profile = activating || changes.coordinates ? await profileOf(db, orgId, current.userId, activating) : undefined;
  // every write moves updatedAt on, also within the same millisecond, for the compare-and-set
  const now = laterThan(nowIso(), current.updatedAt);
  const checkingOut = current.status !== 'checked_out' && status === 'checked_out';
  const coordinates = changes.coordinates ? withAccuracy(changes.coordinates) : current.coordinates;
  const next: Checkin = {
    ...current,
    status,
    coordinates,
    checkInAddress: changes.checkInAddress ?? current.checkInAddress,
    checkOutAddress: changes.checkOutAddress ?? current.checkOutAddress,
    checkedInAt: activating ? now : current.checkedInAt,
    checkedOutAt: checkingOut ? now : current.checkedOutAt,
    updatedAt: now,
  };

  if (coordinates && (activating || changes.coordinates)) Object.assign(next, await verdictFor(db, orgId, { ...next, coordinates }, profile, now));

  if (!changesAnything(current, next)) return current; // nothing to write, updatedAt included (events.ts, finishUpdate)
  if (!(await saveCheckinIfUnchanged(db, orgId, next, current))) return undefined;
  const userChange = activating ? await refreshProfile(db, orgId, profile, next, 'site_checkin_activated', now) : undefined;
  const type = activating ? 'checkin.activated' : checkingOut ? 'checkin.checked_out' : 'checkin.updated';
  await recordUpdate(db, orgId, type, current, next);
  await recordUserChange(db, orgId, userChange);
  return next;
}

/**
 * The user's profile, read with a lock until the write commits, when a check-in is about to use
 * its last location (the geofence's previous position) or refresh it (`refreshing`: an exclusive
 * lock; a shared one for the verdict alone, so that such reads of one profile in one Postgres
 * group commit go together). A read that locks waits for
 * the organization's write lock first (storage/lentKnex.ts), so it sees the profile as the writes
 * before this one left it — also one created by a request that committed a moment ago, which a
 * read before the lock on Postgres missed, leaving its location unrefreshed. And the check-in's time is
 * taken after it: the writes that committed before carry earlier times, so a refresh never moves
 * the location, or the profile's updatedAt, back in time.
 */
async function profileOf(db: Knex, orgId: string, userId: string, refreshing: boolean): Promise<User | undefined> {
  return refreshing ? findUserForUpdate(db, orgId, { userId }) : findUserForReference(db, orgId, userId);
}

/** `now`, or a millisecond after `previous` when the clock has not passed it. */
function laterThan(now: string, previous: string): string {
  return now > previous ? now : new Date(Date.parse(previous) + 1).toISOString();
}

function withAccuracy(coordinates: Coordinates): NonNullable<Checkin['coordinates']> {
  return { latitude: coordinates.latitude, longitude: coordinates.longitude, accuracyMeters: coordinates.accuracyMeters ?? null };
}

async function verdictFor(
  db: Knex,
  orgId: string,
  checkin: Pick<Checkin, 'siteId' | 'checkedInAt' | 'arrivalWindowStartAt' | 'arrivalWindowEndAt'> & { coordinates: NonNullable<Checkin['coordinates']> },
  profile: User | undefined,
  now: string,
): Promise<GeofenceVerdict> {
  const site = await findSite(db, orgId, checkin.siteId);
  return geofenceVerdict({
    site,
    position: checkin.coordinates,
    reportedAt: now,
    checkedInAt: checkin.checkedInAt,
    arrivalWindowStartAt: checkin.arrivalWindowStartAt,
    arrivalWindowEndAt: checkin.arrivalWindowEndAt,
    previous: previousLocation(profile),
  });
}

function previousLocation(profile: User | undefined): PreviousLocation | null {
  if (!profile || profile.lastLocationLat === null || profile.lastLocationLng === null || profile.lastLocationCapturedAt === null) return null;
  return {
    latitude: profile.lastLocationLat,
    longitude: profile.lastLocationLng,
    accuracyMeters: profile.lastLocationAccuracyMeters,
    capturedAt: profile.lastLocationCapturedAt,
  };
}

async function refreshProfile(db: Knex, orgId: string, profile: User | undefined, checkin: Checkin, source: LastLocationSource, now: string): Promise<UserChange | undefined> {
  if (!profile) return undefined;
  return refreshLastLocation(db, orgId, profile, {
    siteId: checkin.siteId,
    checkinId: checkin.id,
    latitude: checkin.coordinates?.latitude ?? null,
    longitude: checkin.coordinates?.longitude ?? null,
    accuracyMeters: checkin.coordinates?.accuracyMeters ?? null,
    source,
    capturedAt: now,
  });
}
