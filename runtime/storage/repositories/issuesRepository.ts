import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { timestampsAfter } from '../../domain/issueLifecycle';
import { newId } from '../../ids';
import { nowIso, normalizeTimestamp, normalizeOptionalTimestamp } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';
import type { ListFilters } from '../listFilters';

export type Issue = components['schemas']['Issue'];
export type IssueCreate = components['schemas']['IssueCreate'];
export type IssueUpdate = components['schemas']['IssueUpdate'];
type IssueStatus = components['schemas']['IssueStatus'];
type IssuePriority = components['schemas']['IssuePriority'];

interface IssueRow {
  seq: number;
  id: string;
  org_id: string;
  title: string;
  description: string | null;
  status: IssueStatus;
  priority: IssuePriority;
  site_id: string | null;
  asset_id: string | null;
  run_id: string | null;
  assignee_user_id: string | null;
  due_at: string | null;
  resolved_at: string | null;
  closed_at: string | null;
  created_at: string;
  updated_at: string;
}

export type IssueFilters = ListFilters<'listIssues'>;

function toIssue(row: IssueRow): Issue {
  return {
    id: row.id,
    title: row.title,
    description: row.description,
    status: row.status,
    priority: row.priority,
    siteId: row.site_id,
    assetId: row.asset_id,
    runId: row.run_id,
    assigneeUserId: row.assignee_user_id,
    dueAt: row.due_at,
    resolvedAt: row.resolved_at,
    closedAt: row.closed_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function createIssue(db: Knex, orgId: string, input: IssueCreate): Promise<Issue> {
  const now = nowIso();
  const status = input.status ?? 'open';
  const stamps = timestampsAfter(undefined, { resolvedAt: null, closedAt: null }, status, now);
  const row: Omit<IssueRow, 'seq'> = {
    id: newId('iss'),
    org_id: orgId,
    title: input.title,
    description: input.description ?? null,
    status,
    priority: input.priority ?? 'medium',
    site_id: input.siteId ?? null,
    asset_id: input.assetId ?? null,
    run_id: input.runId ?? null,
    assignee_user_id: input.assigneeUserId ?? null,
    due_at: input.dueAt === undefined ? null : normalizeTimestamp(input.dueAt),
    resolved_at: stamps.resolvedAt,
    closed_at: stamps.closedAt,
    created_at: now,
    updated_at: now,
  };
  await lockForOrderedInsert(db, 'issues', orgId);
  await db('issues').insert(row);
  return toIssue({ seq: 0, ...row });
}

export async function findIssue(db: Knex, orgId: string, id: string): Promise<Issue | undefined> {
  const row = await db<IssueRow>('issues').where({ org_id: orgId, id }).first();
  return row && toIssue(row);
}

export async function listIssues(db: Knex, orgId: string, filters: IssueFilters, page: PageRequest): Promise<Page<Issue>> {
  const query = db<IssueRow>('issues').where({ org_id: orgId });
  if (filters.status !== undefined) query.where({ status: filters.status });
  if (filters.priority !== undefined) query.where({ priority: filters.priority });
  if (filters.siteId !== undefined) query.where({ site_id: filters.siteId });
  if (filters.assetId !== undefined) query.where({ asset_id: filters.assetId });
  if (filters.runId !== undefined) query.where({ run_id: filters.runId });
  if (filters.assigneeUserId !== undefined) query.where({ assignee_user_id: filters.assigneeUserId });
  return fetchPage(query, ['seq'], page, toIssue);
}

/** Applies the fields present in `changes` and keeps resolvedAt/closedAt in step; undefined when the issue does not exist. */
export async function updateIssue(db: Knex, orgId: string, id: string, changes: IssueUpdate): Promise<Issue | undefined> {
  // Read-then-write inside the request's transaction: the new timestamps depend on the old status.
  const current = await db<IssueRow>('issues').where({ org_id: orgId, id }).forUpdate().first();
  if (!current) return undefined;
  const now = nowIso();
  const columns: Partial<IssueRow> = { updated_at: now };
  if (changes.title !== undefined) columns.title = changes.title;
  if (changes.description !== undefined) columns.description = changes.description;
  if (changes.priority !== undefined) columns.priority = changes.priority;
  if (changes.siteId !== undefined) columns.site_id = changes.siteId;
  if (changes.assetId !== undefined) columns.asset_id = changes.assetId;
  if (changes.runId !== undefined) columns.run_id = changes.runId;
  if (changes.assigneeUserId !== undefined) columns.assignee_user_id = changes.assigneeUserId;
  if (changes.dueAt !== undefined) columns.due_at = normalizeOptionalTimestamp(changes.dueAt) ?? null;
  if (changes.status !== undefined) {
    const stamps = timestampsAfter(current.status, { resolvedAt: current.resolved_at, closedAt: current.closed_at }, changes.status, now);
    columns.status = changes.status;
    columns.resolved_at = stamps.resolvedAt;
    columns.closed_at = stamps.closedAt;
  }
  await db('issues').where({ org_id: orgId, id }).update(columns);
  return toIssue({ ...current, ...columns });
}
