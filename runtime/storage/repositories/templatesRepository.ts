import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';

export type Template = components['schemas']['Template'];
type TemplateItem = components['schemas']['TemplateItem'];

interface TemplateRow {
  seq: number;
  id: string;
  org_id: string;
  name: string;
  description: string | null;
  version: number;
  items: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

function toTemplate(row: TemplateRow): Template {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    version: Number(row.version),
    items: JSON.parse(row.items),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Live (not deleted) templates of the organization. */
function live(db: Knex, orgId: string) {
  return db<TemplateRow>('templates').where({ org_id: orgId }).whereNull('deleted_at');
}

export interface TemplateContent {
  name: string;
  description: string | null;
  items: TemplateItem[];
}

export async function insertTemplate(db: Knex, orgId: string, content: TemplateContent): Promise<Template> {
  const now = nowIso();
  const row: Omit<TemplateRow, 'seq'> = {
    id: newId('tpl'),
    org_id: orgId,
    name: content.name,
    description: content.description,
    version: 1,
    items: JSON.stringify(content.items),
    created_at: now,
    updated_at: now,
    deleted_at: null,
  };
  await lockForOrderedInsert(db, 'templates', orgId);
  await db('templates').insert(row);
  return toTemplate({ seq: 0, ...row });
}

/** Keeps the items of one version: runs read the version they were started with, whatever came after. */
export async function insertTemplateVersion(db: Knex, orgId: string, template: Pick<Template, 'id' | 'version' | 'items' | 'updatedAt'>): Promise<void> {
  await db('template_versions').insert({
    template_id: template.id,
    version: template.version,
    org_id: orgId,
    items: JSON.stringify(template.items),
    created_at: template.updatedAt,
  });
}

export async function findTemplate(db: Knex, orgId: string, id: string): Promise<Template | undefined> {
  const row = await live(db, orgId).where({ id }).first();
  return row && toTemplate(row);
}

export async function listTemplates(db: Knex, orgId: string, page: PageRequest): Promise<Page<Template>> {
  return fetchPage(live(db, orgId), ['seq'], page, toTemplate);
}

/**
 * Reads a live template that a write names, and locks it shared until the caller's transaction ends:
 * as sitesRepository.findSiteForReference does for a site.
 */
export async function findTemplateForReference(db: Knex, orgId: string, id: string): Promise<Template | undefined> {
  const row = await live(db, orgId).where({ id }).first().forKeyShare();
  return row && toTemplate(row);
}

/**
 * The template locked for a read-modify-write: two concurrent updates then make two versions
 * rather than one lost update (Knex drops FOR UPDATE on SQLite, which serializes writers anyway).
 */
export async function findTemplateForUpdate(db: Knex, orgId: string, id: string): Promise<Template | undefined> {
  const row = await live(db, orgId).where({ id }).first().forUpdate();
  return row && toTemplate(row);
}

/** Writes a template's new version; the caller has read and locked it (findTemplateForUpdate). False when it is deleted. */
export async function updateTemplate(db: Knex, orgId: string, next: Template): Promise<boolean> {
  const changed = await live(db, orgId).where({ id: next.id }).update({
    name: next.name,
    description: next.description,
    version: next.version,
    items: JSON.stringify(next.items),
    updated_at: next.updatedAt,
  });
  return changed > 0;
}

/** Soft delete: the version snapshots stay, because runs of the template still read them. */
export async function deleteTemplate(db: Knex, orgId: string, id: string): Promise<boolean> {
  return (await live(db, orgId).where({ id }).update({ deleted_at: nowIso() })) > 0;
}
