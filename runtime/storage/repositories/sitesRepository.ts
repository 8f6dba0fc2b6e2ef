import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import { restoreUpdatedAt } from './updatedAt';

export type Site = components['schemas']['Site'];
export type SiteCreate = components['schemas']['SiteCreate'];
export type SiteUpdate = components['schemas']['SiteUpdate'];

interface SiteRow {
  seq: number;
  id: string;
  org_id: string;
  name: string;
  address: string | null;
  latitude: number | null;
  longitude: number | null;
  geofence_radius_meters: number;
  timezone: string | null;
  created_at: string;
  updated_at: string;
}

const DEFAULT_GEOFENCE_RADIUS_METERS = 100;

function toSite(row: SiteRow): Site {
  return {
    id: row.id,
    name: row.name,
    address: row.address,
    latitude: row.latitude === null ? null : Number(row.latitude),
    longitude: row.longitude === null ? null : Number(row.longitude),
    geofenceRadiusMeters: Number(row.geofence_radius_meters),
    timezone: row.timezone,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function insertSite(db: Knex, orgId: string, input: SiteCreate): Promise<Site> {
  const now = nowIso();
  const row: Omit<SiteRow, 'seq'> = {
    id: newId('site'),
    org_id: orgId,
    name: input.name,
    address: input.address ?? null,
    latitude: input.latitude ?? null,
    longitude: input.longitude ?? null,
    geofence_radius_meters: input.geofenceRadiusMeters ?? DEFAULT_GEOFENCE_RADIUS_METERS,
    timezone: input.timezone ?? null,
    created_at: now,
    updated_at: now,
  };
  await lockForOrderedInsert(db, 'sites', orgId);
  await db('sites').insert(row);
  return toSite({ seq: 0, ...row });
}

export async function findSite(db: Knex, orgId: string, id: string): Promise<Site | undefined> {
  const row = await db<SiteRow>('sites').where({ org_id: orgId, id }).first();
  return row && toSite(row);
}

/**
 * Reads a live site that a write names, and locks it (Postgres' `for key share`) until the
 * caller's transaction ends. The lock is taken behind the organization's write lock, as every lock
 * of a write (storage/lentKnex.ts): a delete that committed before is seen, and one that comes later
 * comes after this write (domain/references.ts).
 */
export async function findSiteForReference(db: Knex, orgId: string, id: string): Promise<Site | undefined> {
  const row = await db<SiteRow>('sites').where({ org_id: orgId, id }).first().forKeyShare();
  return row && toSite(row);
}

/** Reads and locks a site (Postgres) until the caller's transaction ends: the state an update starts from. */
export async function findSiteForUpdate(db: Knex, orgId: string, id: string): Promise<Site | undefined> {
  const row = await db<SiteRow>('sites').where({ org_id: orgId, id }).first().forUpdate();
  return row && toSite(row);
}

export async function listSites(db: Knex, orgId: string, page: PageRequest): Promise<Page<Site>> {
  return fetchPage(db<SiteRow>('sites').where({ org_id: orgId }), ['seq'], page, toSite);
}

/** Applies the fields present in `changes`; false when the site does not exist. */
export async function updateSite(db: Knex, orgId: string, id: string, changes: SiteUpdate): Promise<boolean> {
  const columns: Partial<SiteRow> = { updated_at: nowIso() };
  if (changes.name !== undefined) columns.name = changes.name;
  if (changes.address !== undefined) columns.address = changes.address;
  if (changes.latitude !== undefined) columns.latitude = changes.latitude;
  if (changes.longitude !== undefined) columns.longitude = changes.longitude;
  if (changes.geofenceRadiusMeters !== undefined) columns.geofence_radius_meters = changes.geofenceRadiusMeters;
  if (changes.timezone !== undefined) columns.timezone = changes.timezone;
  return (await db('sites').where({ org_id: orgId, id }).update(columns)) > 0;
}

export async function deleteSite(db: Knex, orgId: string, id: string): Promise<boolean> {
  return (await db('sites').where({ org_id: orgId, id }).delete()) > 0;
}

/** Puts a site's updatedAt back after an update that changed nothing (domain/events.ts, finishUpdate). */
export const restoreSiteUpdatedAt = (db: Knex, orgId: string, id: string, updatedAt: string): Promise<void> => restoreUpdatedAt(db, 'sites', orgId, id, updatedAt);
