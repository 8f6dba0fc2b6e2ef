import { Knex } from 'knex';
import { insertLog, Log, LogCreate } from '../storage/repositories/logsRepository';

/** Log entries are append-only: creating one is their only write. `trx` is the request's transaction. */
export async function createLog(trx: Knex, orgId: string, body: LogCreate): Promise<Log> {
  return insertLog(trx, orgId, body);
}
