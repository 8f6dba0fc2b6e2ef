import { defineHandler } from '../runtime/http/handler';
import { notFound } from '../runtime/errors';
import { findSensorReading } from '../runtime/storage/repositories/sensorReadingsRepository';

export default defineHandler('getSensorReading', async ({ db, principal, path }) => {
  const reading = await findSensorReading(db, principal.orgId, path.id);
  if (!reading) throw notFound('sensor reading', path.id);
  return { status: 200, body: reading };
});
