import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
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

/** Everything of an issue but what the repository assigns (id, createdAt, updatedAt). */
export type IssueFields = Omit<Issue, 'id' | 'createdAt' | 'updatedAt'>;

export async function insertIssue(db: Knex, orgId: string, fields: IssueFields, now: string): Promise<Issue> {
  const row: Omit<IssueRow, 'seq'> = {
    id: newId('iss'),
    org_id: orgId,
    ...toColumns(fields),
    created_at: now,
    updated_at: now,
  } as Omit<IssueRow, 'seq'>;
  await lockForOrderedInsert(db, 'issues', orgId);
  await db('issues').insert(row);
  return toIssue({ seq: 0, ...row });
}

/** The columns of the fields present in `fields`. */
function toColumns(fields: Partial<IssueFields> & { updatedAt?: string }): Partial<IssueRow> {
  const columns: Partial<IssueRow> = {};
  if (fields.title !== undefined) columns.title = fields.title;
  if (fields.description !== undefined) columns.description = fields.description;
  if (fields.status !== undefined) columns.status = fields.status;
  if (fields.priority !== undefined) columns.priority = fields.priority;
  if (fields.siteId !== undefined) columns.site_id = fields.siteId;
  if (fields.assetId !== undefined) columns.asset_id = fields.assetId;
  if (fields.runId !== undefined) columns.run_id = fields.runId;
  if (fields.assigneeUserId !== undefined) columns.assignee_user_id = fields.assigneeUserId;
  if (fields.dueAt !== undefined) columns.due_at = fields.dueAt;
  if (fields.resolvedAt !== undefined) columns.resolved_at = fields.resolvedAt;
  if (fields.closedAt !== undefined) columns.closed_at = fields.closedAt;
  if (fields.updatedAt !== undefined) columns.updated_at = fields.updatedAt;
  return columns;
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

/** The issue locked for a read-modify-write (on Postgres; SQLite serializes writers anyway). */
export async function findIssueForUpdate(db: Knex, orgId: string, id: string): Promise<Issue | undefined> {
  const row = await db<IssueRow>('issues').where({ org_id: orgId, id }).forUpdate().first();
  return row && toIssue(row);
}

/** Writes the fields present in `changes`. */
export async function updateIssue(db: Knex, orgId: string, id: string, changes: Partial<IssueFields> & { updatedAt: string }): Promise<void> {
  await db('issues').where({ org_id: orgId, id }).update(toColumns(changes));
}
