import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { nowIso, normalizeOptionalTimestamp } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import { translateErrors } from '../databaseErrors';
import type { ListFilters } from '../listFilters';
import { restoreUpdatedAt } from './updatedAt';

export type User = components['schemas']['User'];
export type UserCreate = components['schemas']['UserCreate'];
export type UserUpdate = components['schemas']['UserUpdate'];
export type LastLocationSource = components['schemas']['LastLocationSource'];
export type UserFilters = ListFilters<'listUsers'>;

interface UserRow {
  seq: number;
  id: string;
  org_id: string;
  user_id: string;
  last_location_site_id: string | null;
  last_location_checkin_id: string | null;
  last_location_lat: number | null;
  last_location_lng: number | null;
  last_location_accuracy_meters: number | null;
  last_location_source: string | null;
  last_location_captured_at: string | null;
  created_at: string;
  updated_at: string;
}

type LastLocationColumns = Pick<
  UserRow,
  | 'last_location_site_id'
  | 'last_location_checkin_id'
  | 'last_location_lat'
  | 'last_location_lng'
  | 'last_location_accuracy_meters'
  | 'last_location_source'
  | 'last_location_captured_at'
>;

/** A last location written by the server when a check-in produces one. */
export interface CheckinLocation {
  siteId: string;
  checkinId: string;
  latitude: number | null;
  longitude: number | null;
  accuracyMeters: number | null;
  source: LastLocationSource;
  capturedAt: string;
}

const numberOrNull = (value: number | string | null): number | null => (value === null ? null : Number(value));

function toUser(row: UserRow): User {
  return {
    id: row.id,
    userId: row.user_id,
    lastLocationSiteId: row.last_location_site_id,
    lastLocationCheckinId: row.last_location_checkin_id,
    lastLocationLat: numberOrNull(row.last_location_lat),
    lastLocationLng: numberOrNull(row.last_location_lng),
    lastLocationAccuracyMeters: numberOrNull(row.last_location_accuracy_meters),
    lastLocationSource: row.last_location_source as LastLocationSource | null,
    lastLocationCapturedAt: row.last_location_captured_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The columns for the last-location fields present in `fields` (`null` clears one). */
function lastLocationColumns(fields: UserUpdate): Partial<LastLocationColumns> {
  const columns: Partial<LastLocationColumns> = {};
  if (fields.lastLocationSiteId !== undefined) columns.last_location_site_id = fields.lastLocationSiteId;
  if (fields.lastLocationCheckinId !== undefined) columns.last_location_checkin_id = fields.lastLocationCheckinId;
  if (fields.lastLocationLat !== undefined) columns.last_location_lat = fields.lastLocationLat;
  if (fields.lastLocationLng !== undefined) columns.last_location_lng = fields.lastLocationLng;
  if (fields.lastLocationAccuracyMeters !== undefined) columns.last_location_accuracy_meters = fields.lastLocationAccuracyMeters;
  if (fields.lastLocationSource !== undefined) columns.last_location_source = fields.lastLocationSource;
  if (fields.lastLocationCapturedAt !== undefined) columns.last_location_captured_at = normalizeOptionalTimestamp(fields.lastLocationCapturedAt) ?? null;
  return columns;
}

/** Inserts a profile; the unique (organization, userId) index refuses a second one. */
export async function insertUser(db: Knex, orgId: string, input: UserCreate): Promise<User> {
  const now = nowIso();
  const { userId, ...location } = input;
  const row: Omit<UserRow, 'seq'> = {
    id: newId('usr'),
    org_id: orgId,
    user_id: userId,
    last_location_site_id: null,
    last_location_checkin_id: null,
    last_location_lat: null,
    last_location_lng: null,
    last_location_accuracy_meters: null,
    last_location_source: null,
    last_location_captured_at: null,
    ...lastLocationColumns(location),
    created_at: now,
    updated_at: now,
  };
  await lockForOrderedInsert(db, 'users', orgId);
  await translateErrors(db, 'users', () => db('users').insert(row));
  return toUser({ seq: 0, ...row });
}

export async function findUser(db: Knex, orgId: string, id: string): Promise<User | undefined> {
  const row = await db<UserRow>('users').where({ org_id: orgId, id }).first();
  return row && toUser(row);
}

export async function findUserByUserId(db: Knex, orgId: string, userId: string): Promise<User | undefined> {
  const row = await db<UserRow>('users').where({ org_id: orgId, user_id: userId }).first();
  return row && toUser(row);
}

/** Reads and locks a profile (Postgres) until the caller's transaction ends, by id or by userId. */
export async function findUserForUpdate(db: Knex, orgId: string, by: { id: string } | { userId: string }): Promise<User | undefined> {
  const where = 'id' in by ? { org_id: orgId, id: by.id } : { org_id: orgId, user_id: by.userId };
  const row = await db<UserRow>('users').where(where).first().forUpdate();
  return row && toUser(row);
}

/**
 * Reads a profile that a write uses without changing it (a check-in's geofence verdict reads its
 * last location), and locks it shared (Postgres' `for key share`) until the caller's transaction
 * ends: taken behind the organization's write lock, as every lock of a write (storage/lentKnex.ts).
 */
export async function findUserForReference(db: Knex, orgId: string, userId: string): Promise<User | undefined> {
  const row = await db<UserRow>('users').where({ org_id: orgId, user_id: userId }).first().forKeyShare();
  return row && toUser(row);
}

export async function listUsers(db: Knex, orgId: string, filter: UserFilters, page: PageRequest): Promise<Page<User>> {
  const query = db<UserRow>('users').where({ org_id: orgId });
  if (filter.userId !== undefined) query.where({ user_id: filter.userId });
  return fetchPage(query, ['seq'], page, toUser);
}

/** A condition on one stored coordinate under which an update applies. */
export interface StoredCoordinate {
  field: 'lastLocationLat' | 'lastLocationLng';
  stored: boolean;
}

/**
 * Applies the last-location fields present in `changes`; false when the profile does not exist
 * or `onlyIf` does not hold (checked in the same statement, so no concurrent write slips in between).
 */
export async function updateUser(db: Knex, orgId: string, id: string, changes: UserUpdate, onlyIf?: StoredCoordinate): Promise<boolean> {
  const query = db('users').where({ org_id: orgId, id });
  if (onlyIf) {
    const column = onlyIf.field === 'lastLocationLat' ? 'last_location_lat' : 'last_location_lng';
    if (onlyIf.stored) query.whereNotNull(column);
    else query.whereNull(column);
  }
  const updated = await query.update({ ...lastLocationColumns(changes), updated_at: nowIso() });
  return updated > 0;
}

/** Replaces the last location of `userId`'s profile; does nothing when there is no profile. */
export async function refreshLastLocation(db: Knex, orgId: string, userId: string, location: CheckinLocation): Promise<void> {
  const columns: LastLocationColumns = {
    last_location_site_id: location.siteId,
    last_location_checkin_id: location.checkinId,
    last_location_lat: location.latitude,
    last_location_lng: location.longitude,
    last_location_accuracy_meters: location.accuracyMeters,
    last_location_source: location.source,
    last_location_captured_at: location.capturedAt,
  };
  await db('users').where({ org_id: orgId, user_id: userId }).update({ ...columns, updated_at: location.capturedAt });
}

/** Puts a user profile's updatedAt back after an update that changed nothing (domain/events.ts, finishUpdate). */
export const restoreUserUpdatedAt = (db: Knex, orgId: string, id: string, updatedAt: string): Promise<void> => restoreUpdatedAt(db, 'users', orgId, id, updatedAt);
