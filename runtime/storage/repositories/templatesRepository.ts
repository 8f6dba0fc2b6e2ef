import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import type { TemplateItem } from '../../domain/runAnswers';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { lockForOrderedInsert } from '../orderedInsert';

export type Template = components['schemas']['Template'];

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

export async function createTemplate(db: Knex, orgId: string, content: TemplateContent): Promise<Template> {
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
  await db('template_versions').insert({ template_id: row.id, version: 1, org_id: orgId, items: row.items, created_at: now });
  return toTemplate({ seq: 0, ...row });
}

export async function findTemplate(db: Knex, orgId: string, id: string): Promise<Template | undefined> {
  const row = await live(db, orgId).where({ id }).first();
  return row && toTemplate(row);
}

export async function listTemplates(db: Knex, orgId: string, page: PageRequest): Promise<Page<Template>> {
  return fetchPage(live(db, orgId), ['seq'], page, toTemplate);
}

/**
 * Applies the changes as a new version and keeps a snapshot of its items; undefined when the
 * template does not exist. The row is locked first so that two concurrent updates make two
 * versions rather than one lost update (SQLite serializes writers anyway).
 */
export async function updateTemplate(db: Knex, orgId: string, id: string, changes: Partial<TemplateContent>): Promise<Template | undefined> {
  // Knex drops FOR UPDATE on SQLite, which serializes writers anyway
  const current = await live(db, orgId).where({ id }).first().forUpdate();
  if (!current) return undefined;
  const now = nowIso();
  const version = Number(current.version) + 1;
  const items = changes.items === undefined ? current.items : JSON.stringify(changes.items);
  const columns: Partial<TemplateRow> = { version, items, updated_at: now };
  if (changes.name !== undefined) columns.name = changes.name;
  if (changes.description !== undefined) columns.description = changes.description;
  await db('templates').where({ org_id: orgId, id }).update(columns);
  await db('template_versions').insert({ template_id: id, version, org_id: orgId, items, created_at: now });
  return toTemplate({ ...current, ...columns });
}

/** Soft delete: the version snapshots stay, because runs of the template still read them. */
export async function deleteTemplate(db: Knex, orgId: string, id: string): Promise<boolean> {
  return (await live(db, orgId).where({ id }).update({ deleted_at: nowIso() })) > 0;
}

/** The items of one version of a template (deleted or not); undefined when there is no such version. */
export async function findTemplateVersionItems(db: Knex, orgId: string, templateId: string, version: number): Promise<TemplateItem[] | undefined> {
  const row = await db('template_versions').where({ org_id: orgId, template_id: templateId, version }).first('items');
  return row && JSON.parse(row.items);
}
