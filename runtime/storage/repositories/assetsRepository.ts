import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import type { ListFilters } from '../listFilters';
import { restoreUpdatedAt } from './updatedAt';

export type Asset = components['schemas']['Asset'];
export type AssetCreate = components['schemas']['AssetCreate'];
export type AssetUpdate = components['schemas']['AssetUpdate'];
export type AssetStatus = components['schemas']['AssetStatus'];

interface AssetRow {
  seq: number;
  id: string;
  org_id: string;
  name: string;
  site_id: string | null;
  asset_type: string | null;
  serial_number: string | null;
  status: AssetStatus;
  attributes: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export type AssetFilters = ListFilters<'listAssets'>;

function toAsset(row: AssetRow): Asset {
  return {
    id: row.id,
    name: row.name,
    siteId: row.site_id,
    assetType: row.asset_type,
    serialNumber: row.serial_number,
    status: row.status,
    attributes: JSON.parse(row.attributes),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Live (not deleted) assets of the organization: tombstones are invisible to every read. */
function liveAssets(db: Knex, orgId: string) {
  return db<AssetRow>('assets').where({ org_id: orgId }).whereNull('deleted_at');
}

export async function insertAsset(db: Knex, orgId: string, input: AssetCreate): Promise<Asset> {
  const now = nowIso();
  const row: Omit<AssetRow, 'seq'> = {
    id: newId('ast'),
    org_id: orgId,
    name: input.name,
    site_id: input.siteId ?? null,
    asset_type: input.assetType ?? null,
    serial_number: input.serialNumber ?? null,
    status: input.status ?? 'active',
    attributes: JSON.stringify(input.attributes ?? {}),
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
  await lockForOrderedInsert(db, 'assets', orgId);
  await db('assets').insert(row);
  return toAsset({ seq: 0, ...row });
}

export async function findAsset(db: Knex, orgId: string, id: string): Promise<Asset | undefined> {
  const row = await liveAssets(db, orgId).where({ id }).first();
  return row && toAsset(row);
}

/**
 * Reads a live asset that a write names, and locks it shared until the caller's transaction ends:
 * as sitesRepository.findSiteForReference does for a site.
 */
export async function findAssetForReference(db: Knex, orgId: string, id: string): Promise<Asset | undefined> {
  const row = await liveAssets(db, orgId).where({ id }).first().forKeyShare();
  return row && toAsset(row);
}

/** Reads and locks an asset (Postgres) until the caller's transaction ends: the state an update starts from. */
export async function findAssetForUpdate(db: Knex, orgId: string, id: string): Promise<Asset | undefined> {
  const row = await liveAssets(db, orgId).where({ id }).first().forUpdate();
  return row && toAsset(row);
}

export async function listAssets(db: Knex, orgId: string, filters: AssetFilters, page: PageRequest): Promise<Page<Asset>> {
  const query = liveAssets(db, orgId);
  if (filters.siteId !== undefined) query.where({ site_id: filters.siteId });
  if (filters.assetType !== undefined) query.where({ asset_type: filters.assetType });
  if (filters.status !== undefined) query.where({ status: filters.status });
  return fetchPage(query, ['seq'], page, toAsset);
}

/** Applies the fields present in `changes`; false when no live asset has that id. */
export async function updateAsset(db: Knex, orgId: string, id: string, changes: AssetUpdate): Promise<boolean> {
  const columns: Partial<AssetRow> = { updated_at: nowIso() };
  if (changes.name !== undefined) columns.name = changes.name;
  if (changes.siteId !== undefined) columns.site_id = changes.siteId;
  if (changes.assetType !== undefined) columns.asset_type = changes.assetType;
  if (changes.serialNumber !== undefined) columns.serial_number = changes.serialNumber;
  if (changes.status !== undefined) columns.status = changes.status;
  if (changes.attributes !== undefined) columns.attributes = JSON.stringify(changes.attributes);
  return (await liveAssets(db, orgId).where({ id }).update(columns)) > 0;
}

/** Turns a live asset into a tombstone; false when no live asset has that id. */
export async function deleteAsset(db: Knex, orgId: string, id: string): Promise<boolean> {
  const now = nowIso();
  return (await liveAssets(db, orgId).where({ id }).update({ deleted_at: now, updated_at: now })) > 0;
}

/** Puts an asset's updatedAt back after an update that changed nothing (domain/events.ts, finishUpdate). */
export const restoreAssetUpdatedAt = (db: Knex, orgId: string, id: string, updatedAt: string): Promise<void> => restoreUpdatedAt(db, 'assets', orgId, id, updatedAt);
