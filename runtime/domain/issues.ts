import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { notFound } from '../errors';
import { normalizeOptionalTimestamp, normalizeTimestamp, nowIso } from '../time';
import { checkReferences } from './references';
import { changesAnything, recordEvent, recordUpdate } from './events';
import * as issues from '../storage/repositories/issuesRepository';
import type { Issue, IssueCreate, IssueFields, IssueUpdate } from '../storage/repositories/issuesRepository';

export type IssueStatus = components['schemas']['IssueStatus'];

/**
 * Every write of an issue. `trx` is the request's transaction; each returns the issue as GET
 * shows it and records its event last. The server keeps resolvedAt and closedAt truthful as the
 * status moves.
 */

export async function createIssue(trx: Knex, orgId: string, body: IssueCreate): Promise<Issue> {
  await checkReferences(trx, orgId, [
    { pointer: '/siteId', kind: 'site', id: body.siteId },
    { pointer: '/assetId', kind: 'asset', id: body.assetId },
    { pointer: '/runId', kind: 'run', id: body.runId },
  ]);
  const now = nowIso();
  const status = body.status ?? 'open';
  const issue = await issues.insertIssue(trx, orgId, {
    title: body.title,
    description: body.description ?? null,
    status,
    priority: body.priority ?? 'medium',
    siteId: body.siteId ?? null,
    assetId: body.assetId ?? null,
    runId: body.runId ?? null,
    assigneeUserId: body.assigneeUserId ?? null,
    dueAt: body.dueAt === undefined ? null : normalizeTimestamp(body.dueAt),
    ...timestampsAfter(undefined, { resolvedAt: null, closedAt: null }, status, now),
  }, now);
  await recordEvent(trx, orgId, { type: 'issue.created', data: issue });
  return issue;
}

/** Applies the fields present in `changes`; the new timestamps depend on the old status. */
export async function updateIssue(trx: Knex, orgId: string, id: string, changes: IssueUpdate): Promise<Issue> {
  const before = await issues.findIssueForUpdate(trx, orgId, id);
  if (!before) throw notFound('issue', id);
  await checkReferences(trx, orgId, [
    { pointer: '/siteId', kind: 'site', id: changes.siteId, unchanged: before.siteId },
    { pointer: '/assetId', kind: 'asset', id: changes.assetId, unchanged: before.assetId },
    { pointer: '/runId', kind: 'run', id: changes.runId, unchanged: before.runId },
  ]);
  const now = nowIso();
  const fields: Partial<IssueFields> & { updatedAt: string } = {
    title: changes.title,
    description: changes.description,
    priority: changes.priority,
    siteId: changes.siteId,
    assetId: changes.assetId,
    runId: changes.runId,
    assigneeUserId: changes.assigneeUserId,
    dueAt: changes.dueAt === undefined ? undefined : (normalizeOptionalTimestamp(changes.dueAt) ?? null),
    updatedAt: now,
  };
  if (changes.status !== undefined) {
    Object.assign(fields, { status: changes.status, ...timestampsAfter(before.status, { resolvedAt: before.resolvedAt, closedAt: before.closedAt }, changes.status, now) });
  }
  const next: Issue = { ...before };
  for (const [field, value] of Object.entries(fields)) if (value !== undefined) Object.assign(next, { [field]: value });
  if (!changesAnything(before, next)) return before; // nothing to write, updatedAt included (events.ts, finishUpdate)
  await issues.updateIssue(trx, orgId, id, fields);
  await recordUpdate(trx, orgId, updateEventType(before.status, next.status), before, next);
  return next;
}

/**
 * A move to resolved or closed is the event integrators wait for, so it has its own type;
 * anything else — reopening included — is `issue.updated`.
 */
function updateEventType(from: IssueStatus, to: IssueStatus): 'issue.updated' | 'issue.resolved' | 'issue.closed' {
  if (from === to) return 'issue.updated';
  if (to === 'resolved') return 'issue.resolved';
  if (to === 'closed') return 'issue.closed';
  return 'issue.updated';
}

export interface IssueTimestamps {
  resolvedAt: string | null;
  closedAt: string | null;
}

/**
 * The server-kept timestamps after an issue moves from `from` to `to` (`from` undefined on
 * create). Any status may follow any other — issues are reopened in practice — so this never
 * refuses a move; it only keeps the timestamps truthful:
 * - reopening (`open`, `in_progress`) clears both: the earlier fix evidently did not hold;
 * - `resolved` stamps resolvedAt and clears closedAt (a closed issue reopened straight to resolved);
 * - `closed` stamps closedAt and keeps resolvedAt only when the issue was resolved before,
 *   so "closed without a fix" (won't fix, duplicate) stays distinguishable by resolvedAt = null;
 * - re-sending the current status changes nothing, so a retried PATCH does not move the clock.
 */
export function timestampsAfter(from: IssueStatus | undefined, current: IssueTimestamps, to: IssueStatus, now: string): IssueTimestamps {
  if (from === to) return current;
  switch (to) {
    case 'open':
    case 'in_progress':
      return { resolvedAt: null, closedAt: null };
    case 'resolved':
      return { resolvedAt: now, closedAt: null };
    case 'closed':
      return { resolvedAt: from === 'resolved' ? current.resolvedAt : null, closedAt: now };
  }
}
