import { geofenceVerdict, haversineMeters, isImpossibleTravel, isOutsideWindow, NO_VERDICT, noVerdict, VerdictInput } from '../runtime/domain/geofence';

const site = { latitude: 53.8008, longitude: -1.5491, geofenceRadiusMeters: 150 };
const base: VerdictInput = {
  site,
  position: { latitude: 53.8012, longitude: -1.5485, accuracyMeters: 12 },
  reportedAt: '2026-11-22T08:02:00.000Z',
  checkedInAt: null,
  arrivalWindowStartAt: null,
  arrivalWindowEndAt: null,
  previous: null,
};

describe('haversineMeters', () => {
  it('measures one degree of longitude on the equator as 2πR/360', () => {
    expect(haversineMeters({ latitude: 0, longitude: 0 }, { latitude: 0, longitude: 1 })).toBeCloseTo((2 * Math.PI * 6371008.8) / 360, 6);
  });

  it('is zero for the same point, symmetric, and half the circumference for antipodes', () => {
    const a = { latitude: 53.8008, longitude: -1.5491 };
    const b = { latitude: 51.5074, longitude: -0.1278 };
    expect(haversineMeters(a, a)).toBe(0);
    expect(haversineMeters(a, b)).toBeCloseTo(haversineMeters(b, a), 9);
    expect(haversineMeters(a, b) / 1000).toBeCloseTo(272, 0); // Leeds → London
    expect(haversineMeters({ latitude: 0, longitude: 0 }, { latitude: 0, longitude: 180 })).toBeCloseTo(Math.PI * 6371008.8, 3);
  });

  it('crosses the antimeridian the short way', () => {
    expect(haversineMeters({ latitude: 0, longitude: 179.9 }, { latitude: 0, longitude: -179.9 })).toBeCloseTo(22239, 0);
  });
});

describe('geofenceVerdict', () => {
  it('inside the radius with good accuracy: within, not suspicious', () => {
    expect(geofenceVerdict(base)).toEqual({ distanceFromSiteMeters: 59.4, withinGeofence: true, suspicious: false, suspicionReasons: [], geofenceStatus: 'computed' });
  });

  it('no verdict without a site, without a site location, or without a position, with the reason', () => {
    expect(geofenceVerdict({ ...base, site: undefined })).toEqual(noVerdict('site_not_found'));
    expect(geofenceVerdict({ ...base, site: { latitude: null, longitude: null, geofenceRadiusMeters: 100 } })).toEqual(noVerdict('no_site_location'));
    expect(geofenceVerdict({ ...base, position: null })).toEqual(NO_VERDICT);
    expect(NO_VERDICT).toEqual({ distanceFromSiteMeters: null, withinGeofence: null, suspicious: null, suspicionReasons: null, geofenceStatus: 'no_coordinates' });
  });

  it('outside the radius', () => {
    const verdict = geofenceVerdict({ ...base, position: { latitude: 53.804, longitude: -1.5491, accuracyMeters: 10 } });
    expect(verdict).toEqual({ distanceFromSiteMeters: 355.8, withinGeofence: false, suspicious: true, suspicionReasons: ['outside_geofence'], geofenceStatus: 'computed' });
  });

  it('the radius itself is inside (distance <= radius)', () => {
    const verdict = geofenceVerdict({ ...base, site: { ...site, geofenceRadiusMeters: 59.4 } });
    expect(verdict.withinGeofence).toBe(true);
    expect(geofenceVerdict({ ...base, site: { ...site, geofenceRadiusMeters: 59.3 } }).suspicionReasons).toEqual(['outside_geofence']);
  });

  it('low accuracy: accuracy worse than the radius, even inside it; unknown accuracy is not flagged', () => {
    expect(geofenceVerdict({ ...base, position: { ...base.position!, accuracyMeters: 151 } }).suspicionReasons).toEqual(['low_accuracy']);
    expect(geofenceVerdict({ ...base, position: { ...base.position!, accuracyMeters: 150 } }).suspicionReasons).toEqual([]);
    expect(geofenceVerdict({ ...base, position: { latitude: 53.8012, longitude: -1.5485, accuracyMeters: null } }).suspicionReasons).toEqual([]);
  });

  it('outside the arrival window only once checked in', () => {
    const window = { arrivalWindowStartAt: '2026-11-22T08:00:00.000Z', arrivalWindowEndAt: '2026-11-22T09:00:00.000Z' };
    expect(geofenceVerdict({ ...base, ...window, checkedInAt: null }).suspicionReasons).toEqual([]);
    expect(geofenceVerdict({ ...base, ...window, checkedInAt: '2026-11-22T08:30:00.000Z' }).suspicionReasons).toEqual([]);
    expect(geofenceVerdict({ ...base, ...window, checkedInAt: '2026-11-22T07:59:59.999Z' }).suspicionReasons).toEqual(['outside_arrival_window']);
    expect(geofenceVerdict({ ...base, ...window, checkedInAt: '2026-11-22T09:00:00.001Z' }).suspicionReasons).toEqual(['outside_arrival_window']);
  });

  it('impossible travel from the previous known location', () => {
    // Leeds → London (272 km) in one hour is > 250 km/h; in two hours it is not
    const previous = { latitude: 51.5074, longitude: -0.1278, accuracyMeters: 20, capturedAt: '2026-11-22T07:02:00.000Z' };
    expect(geofenceVerdict({ ...base, previous }).suspicionReasons).toEqual(['impossible_travel']);
    expect(geofenceVerdict({ ...base, previous: { ...previous, capturedAt: '2026-11-22T06:02:00.000Z' } }).suspicionReasons).toEqual([]);
  });

  it('reports every reason that applies, in a stable order', () => {
    const verdict = geofenceVerdict({
      ...base,
      position: { latitude: 53.9, longitude: -1.5491, accuracyMeters: 500 },
      checkedInAt: '2026-11-22T10:00:00.000Z',
      arrivalWindowEndAt: '2026-11-22T09:00:00.000Z',
      previous: { latitude: 51.5074, longitude: -0.1278, accuracyMeters: null, capturedAt: '2026-11-22T08:00:00.000Z' },
    });
    expect(verdict).toEqual({
      distanceFromSiteMeters: expect.any(Number),
      withinGeofence: false,
      suspicious: true,
      suspicionReasons: ['outside_geofence', 'low_accuracy', 'outside_arrival_window', 'impossible_travel'],
      geofenceStatus: 'computed',
    });
  });
});

describe('isOutsideWindow', () => {
  it('treats a missing bound as open', () => {
    expect(isOutsideWindow('2026-11-22T08:00:00.000Z', null, null)).toBe(false);
    expect(isOutsideWindow('2026-11-22T08:00:00.000Z', '2026-11-22T09:00:00.000Z', null)).toBe(true);
    expect(isOutsideWindow('2026-11-22T10:00:00.000Z', null, '2026-11-22T09:00:00.000Z')).toBe(true);
    expect(isOutsideWindow('2026-11-22T09:00:00.000Z', '2026-11-22T09:00:00.000Z', '2026-11-22T09:00:00.000Z')).toBe(false);
  });
});

describe('isImpossibleTravel', () => {
  const at = '2026-11-22T08:00:10.000Z';
  const previous = { latitude: 53.8008, longitude: -1.5491, accuracyMeters: 30, capturedAt: '2026-11-22T08:00:00.000Z' };

  it('ignores GPS jitter within both accuracy radii, even seconds apart', () => {
    // ~56 m apart is within 30 + 30 m of accuracy: no certain travel at all, so no speed
    expect(isImpossibleTravel(previous, { latitude: 53.8013, longitude: -1.5491, accuracyMeters: 30 }, at)).toBe(false);
    expect(isImpossibleTravel({ ...previous, capturedAt: at }, { latitude: 53.8013, longitude: -1.5491, accuracyMeters: 30 }, at)).toBe(false);
  });

  it('flags a real jump at the same instant, and a jump faster than 250 km/h', () => {
    expect(isImpossibleTravel({ ...previous, capturedAt: at }, { latitude: 53.81, longitude: -1.5491, accuracyMeters: 5 }, at)).toBe(true);
    // 1 km (less 35 m of accuracy) in 10 s = 347 km/h
    expect(isImpossibleTravel(previous, { latitude: 53.80979, longitude: -1.5491, accuracyMeters: 5 }, at)).toBe(true);
    // the same kilometre in 20 s = 174 km/h
    expect(isImpossibleTravel(previous, { latitude: 53.80979, longitude: -1.5491, accuracyMeters: 5 }, '2026-11-22T08:00:20.000Z')).toBe(false);
  });

  it('treats a previous time after the report as no time elapsed', () => {
    expect(isImpossibleTravel({ ...previous, capturedAt: '2026-11-22T09:00:00.000Z' }, { latitude: 53.81, longitude: -1.5491, accuracyMeters: 5 }, at)).toBe(true);
  });
});
