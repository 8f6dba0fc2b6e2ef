import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { invalidField, notFound } from '../errors';
import { nowIso } from '../time';
import { normalizeTemplateItems } from './runAnswers';
import { recordEvent, recordUpdate, tombstone } from './events';
import * as templates from '../storage/repositories/templatesRepository';
import type { Template } from '../storage/repositories/templatesRepository';

type TemplateCreate = components['schemas']['TemplateCreate'];
type TemplateUpdate = components['schemas']['TemplateUpdate'];

/**
 * Every write of a template. `trx` is the request's transaction; each returns the template as
 * GET shows it and records its event last. Every change makes a new version and keeps a snapshot of its items, because a
 * run answers the version it was started with (docs/architecture.md, "Product rules").
 */

export async function createTemplate(trx: Knex, orgId: string, body: TemplateCreate): Promise<Template> {
  const items = normalizeTemplateItems(body.items);
  const template = await templates.insertTemplate(trx, orgId, { name: body.name, description: body.description ?? null, items });
  await templates.insertTemplateVersion(trx, orgId, template);
  await recordEvent(trx, orgId, { type: 'template.created', data: template });
  return template;
}

export async function updateTemplate(trx: Knex, orgId: string, id: string, changes: TemplateUpdate): Promise<Template> {
  const items = changes.items === undefined ? undefined : normalizeTemplateItems(changes.items);
  const before = await templates.findTemplateForUpdate(trx, orgId, id);
  if (!before) throw notFound('template', id);
  const next: Template = {
    ...before,
    name: changes.name ?? before.name,
    description: changes.description === undefined ? before.description : changes.description,
    version: before.version + 1,
    items: items ?? before.items,
    updatedAt: nowIso(),
  };
  if (!(await templates.updateTemplate(trx, orgId, next))) throw notFound('template', id);
  await templates.insertTemplateVersion(trx, orgId, next);
  // every change makes a version, so `version` is always among the changed fields
  await recordUpdate(trx, orgId, 'template.updated', before, next);
  return next;
}

/** Soft delete: runs of the template keep reading their version's items. */
export async function deleteTemplate(trx: Knex, orgId: string, id: string): Promise<void> {
  // read with a lock first, as an update does: a write of the same template in the same Postgres
  // group commit is then told apart (storage/pgGroupCommit.ts, rowLockedBy)
  if (!(await templates.findTemplateForUpdate(trx, orgId, id)) || !(await templates.deleteTemplate(trx, orgId, id))) throw notFound('template', id);
  await recordEvent(trx, orgId, { type: 'template.deleted', data: tombstone(id) });
}

/**
 * The template a request body names. A missing one is a fault of the body, not of the
 * addressed resource (the operation's path exists), hence 400 naming the field, not 404.
 */
export async function referencedTemplate(db: Knex, orgId: string, templateId: string, pointer = '/templateId'): Promise<Template> {
  const template = await templates.findTemplateForReference(db, orgId, templateId);
  if (!template) throw invalidField(pointer, `does not name a template of this organization (got ${templateId})`);
  return template;
}
