import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { Answers, AnswerValue, completeAnswers, mergeAnswers, TemplateItem } from '../../domain/runAnswers';
import { alreadyExists, invalidTransition } from '../../errors';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import { isUniqueViolation } from '../databaseErrors';
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

/** Starts a run; 409 ALREADY_EXISTS when its occurrence already has one. */
export async function createRun(db: Knex, orgId: string, start: RunStart): Promise<Run> {
  if (start.occurrenceId !== undefined) {
    const existing = await db('runs').where({ org_id: orgId, occurrence_id: start.occurrenceId }).first('id');
    if (existing) throw occurrenceTaken(start.occurrenceId, existing.id);
  }
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
  try {
    await db('runs').insert(row);
  } catch (err) {
    // two requests racing for the same occurrence: the unique index decides
    if (isUniqueViolation(db, err) && start.occurrenceId !== undefined) throw occurrenceTaken(start.occurrenceId);
    throw err;
  }
  return (await findRun(db, orgId, row.id))!;
}

function occurrenceTaken(occurrenceId: string, runId?: string) {
  return alreadyExists(`Occurrence ${occurrenceId} already has a run${runId ? ` (${runId})` : ''}`);
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

/** The run locked for a read-modify-write (on Postgres; Knex drops the clause on SQLite, which serializes writers anyway). */
async function runForUpdate(db: Knex, orgId: string, id: string): Promise<RunWithItems | undefined> {
  return runsWithItems(db, orgId).where('runs.id', id).first().forUpdate('runs');
}

function assertInProgress(row: RunRow): void {
  if (row.status !== 'in_progress') throw invalidTransition(`Run ${row.id} is ${row.status} and can no longer change`);
}

/** Merges answers into an in-progress run; undefined when the run does not exist. */
export async function answerRun(db: Knex, orgId: string, id: string, changes: Record<string, AnswerValue | null>): Promise<Run | undefined> {
  const row = await runForUpdate(db, orgId, id);
  if (!row) return undefined;
  assertInProgress(row);
  const items: TemplateItem[] = JSON.parse(row.items);
  const answers = mergeAnswers(items, Number(row.template_version), JSON.parse(row.answers) as Answers, changes);
  const columns = { answers: JSON.stringify(answers), updated_at: nowIso() };
  await db('runs').where({ org_id: orgId, id }).update(columns);
  return toRun({ ...row, ...columns });
}

/** Completes an in-progress run whose required items are answered; undefined when the run does not exist. */
export async function completeRun(db: Knex, orgId: string, id: string): Promise<Run | undefined> {
  const row = await runForUpdate(db, orgId, id);
  if (!row) return undefined;
  assertInProgress(row);
  const result = completeAnswers(JSON.parse(row.items), JSON.parse(row.answers));
  const now = nowIso();
  const columns = { status: 'completed' as const, score: result.score, failed_item_ids: JSON.stringify(result.failedItemIds), completed_at: now, updated_at: now };
  await db('runs').where({ org_id: orgId, id, status: 'in_progress' }).update(columns);
  return toRun({ ...row, ...columns });
}

/** The runs started for the given occurrences, by occurrence id. */
export async function runsOfOccurrences(db: Knex, orgId: string, occurrenceIds: string[]): Promise<Map<string, { id: string; status: RunStatus }>> {
  const found = new Map<string, { id: string; status: RunStatus }>();
  if (occurrenceIds.length === 0) return found;
  const rows = await db('runs').where({ org_id: orgId }).whereIn('occurrence_id', occurrenceIds).select('id', 'status', 'occurrence_id');
  for (const row of rows) found.set(row.occurrence_id, { id: row.id, status: row.status });
  return found;
}
