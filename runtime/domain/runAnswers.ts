import type { components } from '../../generated/types';
import { ApiError, ErrorDetail, validationError } from '../errors';

/**
 * The checklist item types: what a template item must declare, which answers it accepts, and
 * what completing a run against its items means (RUN_INCOMPLETE, score, failed items).
 */
export type TemplateItem = components['schemas']['TemplateItem'];
export type TemplateItemInput = components['schemas']['TemplateItemInput'];
export type AnswerValue = components['schemas']['AnswerValue'];
export type Answers = Record<string, AnswerValue>;

const MAX_TEXT_LENGTH = 10_000;
const MAX_URL_LENGTH = 2_048;
// The same bound as contract validation reports: enough to fix a request, bounded for hostile input.
const MAX_ERROR_DETAILS = 20;

/** The stored form of a template's items; 400 naming each duplicated id and misplaced `options`. */
export function normalizeTemplateItems(items: TemplateItemInput[], pointer = '/items'): TemplateItem[] {
  const details: ErrorDetail[] = [];
  const firstIndex = new Map<string, number>();
  items.forEach((item, i) => {
    const first = firstIndex.get(item.id);
    if (first === undefined) firstIndex.set(item.id, i);
    else details.push({ path: `${pointer}/${i}/id`, message: `duplicates the id "${item.id}" of ${pointer}/${first}; item ids are unique within a template` });
    if (item.type === 'choice' && item.options === undefined) details.push({ path: `${pointer}/${i}/options`, message: 'is required for a choice item' });
    if (item.type !== 'choice' && item.options !== undefined) details.push({ path: `${pointer}/${i}/options`, message: `is only allowed for choice items (item "${item.id}" is ${item.type})` });
  });
  if (details.length) throw validationError(`${details[0].path} ${details[0].message}`, details);
  return items.map((item) => ({
    id: item.id,
    label: item.label,
    type: item.type,
    required: item.required ?? false,
    options: item.type === 'choice' ? item.options! : null,
  }));
}

/** RFC 6901: an item id chosen by a client may hold `/` or `~`, which a JSON Pointer escapes. */
function answerPointer(itemId: string): string {
  return `/answers/${itemId.replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** Why `value` is not an answer to `item`, or undefined when it is one. */
function answerProblem(item: TemplateItem, value: AnswerValue): string | undefined {
  switch (item.type) {
    case 'yes_no':
      return typeof value === 'boolean' ? undefined : 'must be true or false (yes_no item)';
    case 'text':
      return typeof value === 'string' && value.length >= 1 && value.length <= MAX_TEXT_LENGTH
        ? undefined
        : `must be a non-empty string of at most ${MAX_TEXT_LENGTH} characters (text item)`;
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a number (number item)';
    case 'choice':
      return typeof value === 'string' && item.options!.includes(value)
        ? undefined
        : `must be one of ${item.options!.map((o) => JSON.stringify(o)).join(', ')} (choice item)`;
    case 'photo_url':
      return typeof value === 'string' && isHttpUrl(value) ? undefined : `must be an http or https URL of at most ${MAX_URL_LENGTH} characters (photo_url item)`;
  }
}

function isHttpUrl(value: string): boolean {
  if (value.length > MAX_URL_LENGTH) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/**
 * `current` with `changes` merged in (`null` removes an answer). Every unknown item and every
 * value of the wrong type is reported, one detail per item, and nothing is merged.
 */
export function mergeAnswers(items: TemplateItem[], templateVersion: number, current: Answers, changes: Record<string, AnswerValue | null>): Answers {
  const byId = new Map(items.map((item) => [item.id, item]));
  const details: ErrorDetail[] = [];
  const merged: Answers = { ...current };
  for (const [itemId, value] of Object.entries(changes)) {
    const item = byId.get(itemId);
    if (!item) {
      details.push({ path: answerPointer(itemId), message: `is not an item of this run's template (version ${templateVersion})` });
      continue;
    }
    if (value === null) {
      delete merged[itemId];
      continue;
    }
    const problem = answerProblem(item, value);
    if (problem) details.push({ path: answerPointer(itemId), message: problem });
    else merged[itemId] = value;
  }
  if (details.length) {
    const more = details.length > 1 ? ` (and ${details.length - 1} more)` : '';
    throw validationError(`${details[0].path} ${details[0].message}${more}`, details.slice(0, MAX_ERROR_DETAILS));
  }
  // Answers are kept in template order, so a run reads like its checklist.
  const ordered: Answers = {};
  for (const item of items) if (item.id in merged) ordered[item.id] = merged[item.id];
  return ordered;
}

export interface RunResult {
  score: number | null;
  failedItemIds: string[];
}

/**
 * The result of completing a run, or 409 RUN_INCOMPLETE listing every unanswered required item.
 * Score: the share of answered yes_no items answered yes (null when none is answered).
 */
export function completeAnswers(items: TemplateItem[], answers: Answers): RunResult {
  const missing = items.filter((item) => item.required && !(item.id in answers));
  if (missing.length) {
    throw new ApiError(
      'RUN_INCOMPLETE',
      `The run has ${missing.length} unanswered required item${missing.length === 1 ? '' : 's'}: ${missing.map((i) => i.id).join(', ')}`,
      missing.map((item) => ({ path: answerPointer(item.id), message: `is required (${item.label})` })),
    );
  }
  const yesNo = items.filter((item) => item.type === 'yes_no' && typeof answers[item.id] === 'boolean');
  const failedItemIds = yesNo.filter((item) => answers[item.id] === false).map((item) => item.id);
  const score = yesNo.length === 0 ? null : (yesNo.length - failedItemIds.length) / yesNo.length;
  return { score, failedItemIds };
}
