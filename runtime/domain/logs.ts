import { Knex } from 'knex';
import { insertLog, Log, LogCreate } from '../storage/repositories/logsRepository';
import { recordEvent } from './events';

/** Log entries are append-only: creating one is their only write. `trx` is the request's transaction. */
export async function createLog(trx: Knex, orgId: string, body: LogCreate): Promise<Log> {
  const log = await insertLog(trx, orgId, body);
  await recordEvent(trx, orgId, { type: 'log.created', data: log });
  return log;
}
