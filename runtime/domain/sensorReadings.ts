import { Knex } from 'knex';
import type { components } from '../../generated/types';
import { ingestSensorReadings as storeBatch } from '../storage/repositories/sensorReadingsRepository';
import type { SensorReadingIngestResult, SensorReadingInput } from '../storage/repositories/sensorReadingsRepository';
import { recordEvent } from './events';

type SensorReadingsIngested = components['schemas']['SensorReadingsIngested'];

/**
 * Sensor readings are written only in batches, all or nothing in the request's transaction. A
 * reading is identified by provider, sensor, metric and time within an organization: a reading
 * already stored, or repeated within the batch, is answered as a duplicate and not stored again.
 * The identity rule is applied by the storage statement itself (an ON CONFLICT on the unique
 * index), because that is what makes concurrent batches safe.
 *
 * A batch records one `sensor_readings.ingested` event with the readings it stored; a batch that
 * stored nothing (only duplicates) records none, since nothing changed: devices resend freely,
 * and a resend must not wake every subscriber.
 */
export async function ingestSensorReadings(trx: Knex, orgId: string, readings: readonly SensorReadingInput[]): Promise<SensorReadingIngestResult> {
  const result = await storeBatch(trx, orgId, readings);
  if (result.ingested > 0) {
    const data: SensorReadingsIngested = {
      ingested: result.ingested,
      duplicates: result.duplicates,
      data: result.data.filter((reading) => !reading.duplicate).map(({ duplicate: _, ...reading }) => reading),
    };
    await recordEvent(trx, orgId, { type: 'sensor_readings.ingested', data });
  }
  return result;
}
