import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import { translateErrors } from '../databaseErrors';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import type { ListFilters } from '../listFilters';

export type Run = components['schemas']['Run'];
export type RunStatus = components['schemas']['RunStatus'];

interface RunRow {
  seq: number;
  id: string;
  org_id: string;
  template_id: string;
  template_version: number;
  site_id: string;
  user_id: string;
  asset_id: string | null;
  occurrence_id: string | null;
  status: RunStatus;
  answers: string;
  score: number | null;
  failed_item_ids: string | null;
  started_at: string;
  completed_at: string | null;
  created_at: string;
  updated_at: string;
}

/** A run row joined with the items of its template version. */
type RunWithItems = RunRow & { items: string };

function toRun(row: RunWithItems): Run {
  return {
    id: row.id,
    templateId: row.template_id,
    templateVersion: Number(row.template_version),
    items: JSON.parse(row.items),
    siteId: row.site_id,
    userId: row.user_id,
    assetId: row.asset_id,
    occurrenceId: row.occurrence_id,
    status: row.status,
    answers: JSON.parse(row.answers),
    score: row.score === null ? null : Number(row.score),
    failedItemIds: row.failed_item_ids === null ? null : JSON.parse(row.failed_item_ids),
    startedAt: row.started_at,
    completedAt: row.completed_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Runs of the organization with the items of the template version each was started with. */
function runsWithItems(db: Knex, orgId: string) {
  return db('runs')
    .join('template_versions', (on) => {
      on.on('template_versions.template_id', 'runs.template_id').andOn('template_versions.version', 'runs.template_version');
    })
    .where('runs.org_id', orgId)
    .select('runs.*', 'template_versions.items as items');
}

export interface RunStart {
  templateId: string;
  templateVersion: number;
  siteId: string;
  userId: string;
  assetId?: string;
  occurrenceId?: string;
}

/** The id of the run started for an occurrence, if any. */
export async function findRunIdOfOccurrence(db: Knex, orgId: string, occurrenceId: string): Promise<string | undefined> {
  const row = await db('runs').where({ org_id: orgId, occurrence_id: occurrenceId }).first('id');
  return row?.id;
}

/** Inserts a run in progress; the unique index on its occurrence refuses a second (UniqueViolation). */
export async function insertRun(db: Knex, orgId: string, start: RunStart): Promise<Run> {
  const now = nowIso();
  const row: Omit<RunRow, 'seq'> = {
    id: newId('run'),
    org_id: orgId,
    template_id: start.templateId,
    template_version: start.templateVersion,
    site_id: start.siteId,
    user_id: start.userId,
    asset_id: start.assetId ?? null,
    occurrence_id: start.occurrenceId ?? null,
    status: 'in_progress',
    answers: '{}',
    score: null,
    failed_item_ids: null,
    started_at: now,
    completed_at: null,
    created_at: now,
    updated_at: now,
  };
  await lockForOrderedInsert(db, 'runs', orgId);
  await translateErrors(db, 'runs', () => db('runs').insert(row));
  return (await findRun(db, orgId, row.id))!;
}

export async function findRun(db: Knex, orgId: string, id: string): Promise<Run | undefined> {
  const row = await runsWithItems(db, orgId).where('runs.id', id).first();
  return row && toRun(row);
}

export type RunFilters = ListFilters<'listRuns'>;

export async function listRuns(db: Knex, orgId: string, filters: RunFilters, page: PageRequest): Promise<Page<Run>> {
  const query = runsWithItems(db, orgId);
  if (filters.status !== undefined) query.where('runs.status', filters.status);
  if (filters.siteId !== undefined) query.where('runs.site_id', filters.siteId);
  if (filters.templateId !== undefined) query.where('runs.template_id', filters.templateId);
  if (filters.userId !== undefined) query.where('runs.user_id', filters.userId);
  return fetchPage(query, ['runs.seq'], page, toRun);
}

/**
 * Reads a live run that a write names, and locks it shared until the caller's transaction ends:
 * as sitesRepository.findSiteForReference does for a site.
 */
export async function findRunForReference(db: Knex, orgId: string, id: string): Promise<Run | undefined> {
  const row = await runsWithItems(db, orgId).where('runs.id', id).first().forKeyShare('runs');
  return row && toRun(row);
}

/** The run locked for a read-modify-write (on Postgres; Knex drops the clause on SQLite, which serializes writers anyway). */
export async function findRunForUpdate(db: Knex, orgId: string, id: string): Promise<Run | undefined> {
  const row = await runsWithItems(db, orgId).where('runs.id', id).first().forUpdate('runs');
  return row && toRun(row);
}

export async function updateRunAnswers(db: Knex, orgId: string, run: Pick<Run, 'id' | 'answers' | 'updatedAt'>): Promise<void> {
  await db('runs').where({ org_id: orgId, id: run.id }).update({ answers: JSON.stringify(run.answers), updated_at: run.updatedAt });
}

/** Writes the completion of a run still in progress. */
export async function markRunCompleted(db: Knex, orgId: string, run: Pick<Run, 'id' | 'score' | 'failedItemIds' | 'completedAt' | 'updatedAt'>): Promise<void> {
  await db('runs').where({ org_id: orgId, id: run.id, status: 'in_progress' }).update({
    status: 'completed',
    score: run.score,
    failed_item_ids: JSON.stringify(run.failedItemIds),
    completed_at: run.completedAt,
    updated_at: run.updatedAt,
  });
}

/** The runs started for the given occurrences, by occurrence id. */
export async function runsOfOccurrences(db: Knex, orgId: string, occurrenceIds: string[]): Promise<Map<string, { id: string; status: RunStatus }>> {
  const found = new Map<string, { id: string; status: RunStatus }>();
  if (occurrenceIds.length === 0) return found;
  const rows = await db('runs').where({ org_id: orgId }).whereIn('occurrence_id', occurrenceIds).select('id', 'status', 'occurrence_id');
  for (const row of rows) found.set(row.occurrence_id, { id: row.id, status: row.status });
  return found;
}
