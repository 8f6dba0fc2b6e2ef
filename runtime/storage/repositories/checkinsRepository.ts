import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import { selectRows } from '../database';
import type { ListFilters } from '../listFilters';

export type Checkin = components['schemas']['Checkin'];
export type CheckinStatus = components['schemas']['CheckinStatus'];
type SuspicionReason = components['schemas']['SuspicionReason'];
type GeofenceStatus = components['schemas']['GeofenceStatus'];

/** Everything of a check-in but what the repository assigns (id, createdAt). */
export type CheckinFields = Omit<Checkin, 'id' | 'createdAt'>;

export type CheckinFilter = ListFilters<'listCheckins'>;

/** Every column of a check-in, named (a prepared statement keeps its result type: storage/database.ts). */
const FIND_CHECKIN_SQL = `select seq, id, org_id, user_id, site_id, status, arrival_window_start_at, arrival_window_end_at, latitude, longitude, accuracy_meters, check_in_address, check_out_address, checked_in_at, checked_out_at, distance_from_site_meters, within_geofence, suspicious, suspicion_reasons, geofence_status, created_at, updated_at
  from checkins where org_id = ? and id = ? limit 1`;

interface CheckinRow {
  seq: number;
  id: string;
  org_id: string;
  user_id: string;
  site_id: string;
  status: string;
  arrival_window_start_at: string | null;
  arrival_window_end_at: string | null;
  latitude: number | null;
  longitude: number | null;
  accuracy_meters: number | null;
  check_in_address: string | null;
  check_out_address: string | null;
  checked_in_at: string | null;
  checked_out_at: string | null;
  distance_from_site_meters: number | null;
  // SQLite answers 0/1, Postgres true/false
  within_geofence: boolean | number | null;
  suspicious: boolean | number | null;
  suspicion_reasons: string | null;
  geofence_status: string;
  created_at: string;
  updated_at: string;
}

const numberOrNull = (value: number | string | null): number | null => (value === null ? null : Number(value));
const booleanOrNull = (value: boolean | number | null): boolean | null => (value === null ? null : Boolean(value));

function toCheckin(row: CheckinRow): Checkin {
  return {
    id: row.id,
    userId: row.user_id,
    siteId: row.site_id,
    status: row.status as CheckinStatus,
    arrivalWindowStartAt: row.arrival_window_start_at,
    arrivalWindowEndAt: row.arrival_window_end_at,
    coordinates:
      row.latitude === null || row.longitude === null
        ? null
        : { latitude: Number(row.latitude), longitude: Number(row.longitude), accuracyMeters: numberOrNull(row.accuracy_meters) },
    checkInAddress: row.check_in_address,
    checkOutAddress: row.check_out_address,
    checkedInAt: row.checked_in_at,
    checkedOutAt: row.checked_out_at,
    distanceFromSiteMeters: numberOrNull(row.distance_from_site_meters),
    withinGeofence: booleanOrNull(row.within_geofence),
    suspicious: booleanOrNull(row.suspicious),
    suspicionReasons: row.suspicion_reasons === null ? null : (JSON.parse(row.suspicion_reasons) as SuspicionReason[]),
    geofenceStatus: row.geofence_status as GeofenceStatus,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The columns a check-in's fields are stored in (all but seq, id, org_id, created_at). */
function toColumns(fields: CheckinFields): Omit<CheckinRow, 'seq' | 'id' | 'org_id' | 'created_at'> {
  return {
    user_id: fields.userId,
    site_id: fields.siteId,
    status: fields.status,
    arrival_window_start_at: fields.arrivalWindowStartAt,
    arrival_window_end_at: fields.arrivalWindowEndAt,
    latitude: fields.coordinates?.latitude ?? null,
    longitude: fields.coordinates?.longitude ?? null,
    accuracy_meters: fields.coordinates?.accuracyMeters ?? null,
    check_in_address: fields.checkInAddress,
    check_out_address: fields.checkOutAddress,
    checked_in_at: fields.checkedInAt,
    checked_out_at: fields.checkedOutAt,
    distance_from_site_meters: fields.distanceFromSiteMeters,
    within_geofence: fields.withinGeofence,
    suspicious: fields.suspicious,
    suspicion_reasons: fields.suspicionReasons === null ? null : JSON.stringify(fields.suspicionReasons),
    geofence_status: fields.geofenceStatus,
    updated_at: fields.updatedAt,
  };
}

export async function insertCheckin(db: Knex, orgId: string, fields: CheckinFields): Promise<Checkin> {
  const row: Omit<CheckinRow, 'seq'> = { id: newId('chk'), org_id: orgId, ...toColumns(fields), created_at: fields.updatedAt };
  await lockForOrderedInsert(db, 'checkins', orgId);
  await db('checkins').insert(row);
  return toCheckin({ seq: 0, ...row });
}

export async function findCheckin(db: Knex, orgId: string, id: string): Promise<Checkin | undefined> {
  // the read the bench measures: through the driver on Knex's connection (storage/database.ts)
  const [row] = await selectRows<CheckinRow>(db, FIND_CHECKIN_SQL, [orgId, id]);
  return row && toCheckin(row);
}

export async function listCheckins(db: Knex, orgId: string, filter: CheckinFilter, page: PageRequest): Promise<Page<Checkin>> {
  const query = db<CheckinRow>('checkins').where({ org_id: orgId });
  if (filter.userId !== undefined) query.where({ user_id: filter.userId });
  if (filter.siteId !== undefined) query.where({ site_id: filter.siteId });
  if (filter.status !== undefined) query.where({ status: filter.status });
  return fetchPage(query, ['seq'], page, toCheckin);
}

/**
 * Writes `next` over the check-in only while it is still as `read` (its status and `updatedAt`,
 * which every write changes): a compare-and-set, so two concurrent writes cannot both win and
 * neither overwrites the other's change (on either database, without holding row locks from the
 * read on). False when the check-in changed meanwhile.
 */
export async function saveCheckinIfUnchanged(db: Knex, orgId: string, next: Checkin, read: Pick<Checkin, 'status' | 'updatedAt'>): Promise<boolean> {
  const updated = await db('checkins').where({ org_id: orgId, id: next.id, status: read.status, updated_at: read.updatedAt }).update(toColumns(next));
  return updated > 0;
}
