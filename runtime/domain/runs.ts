import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { alreadyExists, invalidField, invalidTransition, notFound } from '../errors';
import { nowIso } from '../time';
import { isOccurrenceOf, scheduleIdOfOccurrence } from './calendar';
import { completeAnswers, mergeAnswers } from './runAnswers';
import { checkReferences } from './references';
import { referencedTemplate } from './templates';
import { changesAnything, recordEvent, recordUpdate } from './events';
import { UniqueViolation } from '../storage/databaseErrors';
import * as runs from '../storage/repositories/runsRepository';
import type { Run } from '../storage/repositories/runsRepository';
import { findScheduleForReference } from '../storage/repositories/schedulesRepository';

type RunCreate = components['schemas']['RunCreate'];
type RunUpdate = components['schemas']['RunUpdate'];

/**
 * Every write of an inspection run. `trx` is the request's transaction; each returns the run as
 * GET shows it and records its event last. A run answers the template version it was started with; it is `in_progress`
 * until completed, and a completed run never changes again. One run per calendar occurrence.
 */

export async function createRun(trx: Knex, orgId: string, body: RunCreate): Promise<Run> {
  await checkReferences(trx, orgId, [
    { pointer: '/templateId', kind: 'template', id: body.templateId },
    { pointer: '/siteId', kind: 'site', id: body.siteId },
    { pointer: '/assetId', kind: 'asset', id: body.assetId },
  ]);
  const template = await referencedTemplate(trx, orgId, body.templateId);
  if (body.occurrenceId !== undefined) {
    const scheduleId = scheduleIdOfOccurrence(body.occurrenceId);
    const schedule = scheduleId === undefined ? undefined : await findScheduleForReference(trx, orgId, scheduleId);
    if (!schedule || !isOccurrenceOf(schedule, body.occurrenceId)) throw invalidField('/occurrenceId', 'does not name an occurrence of any schedule of this organization');
    if (schedule.templateId !== body.templateId) throw invalidField('/templateId', `must be the occurrence's template ${schedule.templateId}`);
    if (schedule.siteId !== body.siteId) throw invalidField('/siteId', `must be the occurrence's site ${schedule.siteId}`);
    const existing = await runs.findRunIdOfOccurrence(trx, orgId, body.occurrenceId);
    if (existing) throw occurrenceTaken(body.occurrenceId, existing);
  }
  let run: Run;
  try {
    run = await runs.insertRun(trx, orgId, { ...body, templateVersion: template.version });
  } catch (err) {
    // two requests racing for the same occurrence: the unique index decides
    if (err instanceof UniqueViolation && body.occurrenceId !== undefined) throw occurrenceTaken(body.occurrenceId);
    throw err;
  }
  await recordEvent(trx, orgId, { type: 'run.started', data: run });
  return run;
}

/** Merges answers into a run in progress (`null` removes one); each answer is checked against its item. */
export async function updateRun(trx: Knex, orgId: string, id: string, body: RunUpdate): Promise<Run> {
  const before = await inProgressRun(trx, orgId, id);
  const next: Run = { ...before, answers: mergeAnswers(before.items, before.templateVersion, before.answers, body.answers), updatedAt: nowIso() };
  if (!changesAnything(before, next)) return before; // the same answers again: nothing to write, updatedAt included (events.ts, finishUpdate)
  await runs.updateRunAnswers(trx, orgId, next);
  await recordUpdate(trx, orgId, 'run.updated', before, next);
  return next;
}

/** Completes a run whose required items are all answered (else 409 RUN_INCOMPLETE), with its score. */
export async function completeRun(trx: Knex, orgId: string, id: string): Promise<Run> {
  const before = await inProgressRun(trx, orgId, id);
  const result = completeAnswers(before.items, before.answers);
  const now = nowIso();
  const next: Run = { ...before, status: 'completed', score: result.score, failedItemIds: result.failedItemIds, completedAt: now, updatedAt: now };
  await runs.markRunCompleted(trx, orgId, next);
  await recordUpdate(trx, orgId, 'run.completed', before, next);
  return next;
}

async function inProgressRun(trx: Knex, orgId: string, id: string): Promise<Run> {
  const run = await runs.findRunForUpdate(trx, orgId, id);
  if (!run) throw notFound('run', id);
  if (run.status !== 'in_progress') throw invalidTransition(`Run ${run.id} is ${run.status} and can no longer change`);
  return run;
}

function occurrenceTaken(occurrenceId: string, runId?: string) {
  return alreadyExists(`Occurrence ${occurrenceId} already has a run${runId ? ` (${runId})` : ''}`);
}
