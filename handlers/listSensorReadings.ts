import { defineHandler, filtersOf, pageOf } from '../runtime/http/handler';
import { invalidField } from '../runtime/errors';
import { normalizeTimestamp } from '../runtime/time';
import { listSensorReadings } from '../runtime/storage/repositories/sensorReadingsRepository';

export default defineHandler('listSensorReadings', async ({ db, principal, query }) => {
  const occurredAfter = query.occurredAfter === undefined ? undefined : normalizeTimestamp(query.occurredAfter);
  const occurredBefore = query.occurredBefore === undefined ? undefined : normalizeTimestamp(query.occurredBefore);
  // both bounds are exclusive, so such a window is always empty: most likely the two are swapped
  if (occurredAfter !== undefined && occurredBefore !== undefined && occurredBefore <= occurredAfter) {
    throw invalidField('/query/occurredBefore', 'must be later than occurredAfter');
  }
  const filter = { ...filtersOf(query), occurredAfter, occurredBefore };
  return { status: 200, body: await listSensorReadings(db, principal.orgId, filter, pageOf(query)) };
});
