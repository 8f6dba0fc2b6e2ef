import { Knex } from 'knex';
import type { components } from '../../../generated/types';
import { newId } from '../../ids';
import { nowIso } from '../../time';
import type { Page, PageRequest } from '../../cursor';
import { fetchPage } from '../pagination';
import { insertInOrder } from '../orderedInsert';

export type Log = components['schemas']['Log'];
export type LogCreate = components['schemas']['LogCreate'];
type LogEntryType = components['schemas']['LogEntryType'];

interface LogRow {
  seq: number;
  id: string;
  org_id: string;
  entity_type: string;
  entity_id: string;
  entry_type: LogEntryType;
  message: string;
  source: string;
  created_at: string;
}

function toLog(row: LogRow): Log {
  return {
    id: row.id,
    entityType: row.entity_type,
    entityId: row.entity_id,
    entryType: row.entry_type,
    message: row.message,
    source: row.source,
    createdAt: row.created_at,
  };
}

/** Appends an entry. Defaults (`comment`, `api`) come from the contract, filled in by validation. */
export async function insertLog(db: Knex, orgId: string, input: LogCreate): Promise<Log> {
  const row: Omit<LogRow, 'seq'> = {
    id: newId('log'),
    org_id: orgId,
    entity_type: input.entityType,
    entity_id: input.entityId,
    entry_type: input.entryType ?? 'comment',
    message: input.message,
    source: input.source ?? 'api',
    created_at: nowIso(),
  };
  await insertInOrder(db, 'logs', orgId, row);
  return toLog({ seq: 0, ...row });
}

export async function findLog(db: Knex, orgId: string, id: string): Promise<Log | undefined> {
  const row = await db<LogRow>('logs').where({ org_id: orgId, id }).first();
  return row && toLog(row);
}

/** The entries of one entity, oldest first (insertion order). */
export async function listLogs(
  db: Knex,
  orgId: string,
  entity: { entityType: string; entityId: string },
  page: PageRequest,
): Promise<Page<Log>> {
  const query = db<LogRow>('logs').where({ org_id: orgId, entity_type: entity.entityType, entity_id: entity.entityId });
  return fetchPage(query, ['seq'], page, toLog);
}
