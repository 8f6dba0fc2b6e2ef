import { Knex } from 'knex';
import { ingestSensorReadings as storeBatch } from '../storage/repositories/sensorReadingsRepository';
import type { SensorReadingIngestResult, SensorReadingInput } from '../storage/repositories/sensorReadingsRepository';

/**
 * Sensor readings are written only in batches, all or nothing in the request's transaction. A
 * reading is identified by provider, sensor, metric and time within an organization: a reading
 * already stored, or repeated within the batch, is answered as a duplicate and not stored again.
 * The identity rule is applied by the storage statement itself (an ON CONFLICT on the unique
 * index), because that is what makes concurrent batches safe.
 */
export async function ingestSensorReadings(trx: Knex, orgId: string, readings: readonly SensorReadingInput[]): Promise<SensorReadingIngestResult> {
  return storeBatch(trx, orgId, readings);
}
