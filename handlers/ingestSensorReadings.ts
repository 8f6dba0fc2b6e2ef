import { defineHandler } from '../runtime/http/handler';
import { ingestSensorReadings } from '../runtime/domain/sensorReadings';

// `db` is the request's transaction: the batch is stored all-or-nothing, with its idempotent response.
export default defineHandler('ingestSensorReadings', async ({ db, principal, body }) => ({
  status: 201,
  body: await ingestSensorReadings(db, principal.orgId, body.readings),
}));
