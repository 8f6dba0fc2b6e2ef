import { invalidField } from '../errors';

/**
 * The geofence verdict of a check-in position (docs/architecture.md, "Users and check-ins"). Pure: no storage,
 * no clock. The flags annotate a check-in for a reviewer; they never reject it.
 */

/** Mean earth radius (IUGG), in meters. */
export const EARTH_RADIUS_METERS = 6371008.8;

/** Faster than this between two known positions is not a plausible journey on the ground. */
export const IMPOSSIBLE_TRAVEL_KMH = 250;

export const SUSPICION_REASONS = ['outside_geofence', 'low_accuracy', 'outside_arrival_window', 'impossible_travel'] as const;
export type SuspicionReason = (typeof SUSPICION_REASONS)[number];

export interface GeoPoint {
  latitude: number;
  longitude: number;
}

export interface ReportedPosition extends GeoPoint {
  accuracyMeters?: number | null;
}

export interface SiteLocation {
  latitude: number | null;
  longitude: number | null;
  geofenceRadiusMeters: number;
}

export interface PreviousLocation extends ReportedPosition {
  capturedAt: string;
}

export interface VerdictInput {
  /** The site named by the check-in, when it exists in the organization. */
  site: SiteLocation | undefined;
  /** The check-in's reported position. */
  position: ReportedPosition | null;
  /** When the position was reported (ISO 8601). */
  reportedAt: string;
  /** When the check-in became active, or null while it has not. */
  checkedInAt: string | null;
  arrivalWindowStartAt: string | null;
  arrivalWindowEndAt: string | null;
  /** The user's last known location before this report, if any. */
  previous: PreviousLocation | null;
}

/** Whether the verdict fields are set and, when they are not, why (the contract's `GeofenceStatus`). */
export type GeofenceStatus = 'computed' | 'no_coordinates' | 'site_not_found' | 'no_site_location';

export interface GeofenceVerdict {
  distanceFromSiteMeters: number | null;
  withinGeofence: boolean | null;
  suspicious: boolean | null;
  suspicionReasons: SuspicionReason[] | null;
  geofenceStatus: GeofenceStatus;
}

/** No verdict, for `reason`: a client sees why the verdict fields are null instead of guessing. */
export function noVerdict(reason: Exclude<GeofenceStatus, 'computed'>): GeofenceVerdict {
  return { distanceFromSiteMeters: null, withinGeofence: null, suspicious: null, suspicionReasons: null, geofenceStatus: reason };
}

/** A check-in without a reported position. */
export const NO_VERDICT: GeofenceVerdict = noVerdict('no_coordinates');

/** Great-circle distance by the haversine formula, in meters. */
export function haversineMeters(a: GeoPoint, b: GeoPoint): number {
  const rad = Math.PI / 180;
  const dLat = (b.latitude - a.latitude) * rad;
  const dLng = (b.longitude - a.longitude) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.latitude * rad) * Math.cos(b.latitude * rad) * Math.sin(dLng / 2) ** 2;
  // min(1, …) guards against rounding just above 1 for antipodal points
  return 2 * EARTH_RADIUS_METERS * Math.asin(Math.min(1, Math.sqrt(h)));
}

/**
 * The verdict, or all nulls with the reason when there is nothing to measure against (no
 * position, no such site, or a site without a location). The reported distance is rounded to 0.1 m and `withinGeofence` is decided on
 * that same rounded value, so the response never contradicts itself.
 */
export function geofenceVerdict(input: VerdictInput): GeofenceVerdict {
  const { site, position } = input;
  if (!position) return NO_VERDICT;
  if (!site) return noVerdict('site_not_found');
  if (site.latitude === null || site.longitude === null) return noVerdict('no_site_location');

  const distance = Math.round(haversineMeters({ latitude: site.latitude, longitude: site.longitude }, position) * 10) / 10;
  const withinGeofence = distance <= site.geofenceRadiusMeters;
  const reasons: SuspicionReason[] = [];
  if (!withinGeofence) reasons.push('outside_geofence');
  if (position.accuracyMeters != null && position.accuracyMeters > site.geofenceRadiusMeters) reasons.push('low_accuracy');
  if (input.checkedInAt !== null && isOutsideWindow(input.checkedInAt, input.arrivalWindowStartAt, input.arrivalWindowEndAt)) {
    reasons.push('outside_arrival_window');
  }
  if (input.previous && isImpossibleTravel(input.previous, position, input.reportedAt)) reasons.push('impossible_travel');
  return { distanceFromSiteMeters: distance, withinGeofence, suspicious: reasons.length > 0, suspicionReasons: reasons, geofenceStatus: 'computed' };
}

/** A missing bound leaves that side of the window open; no window at all is never outside. */
export function isOutsideWindow(at: string, startAt: string | null, endAt: string | null): boolean {
  const t = Date.parse(at);
  if (startAt !== null && t < Date.parse(startAt)) return true;
  if (endAt !== null && t > Date.parse(endAt)) return true;
  return false;
}

/**
 * True when going from `previous` to `current` needs more than IMPOSSIBLE_TRAVEL_KMH.
 * The distance that was certainly covered is the measured distance less both positions'
 * accuracy radii: GPS jitter between two reports a few seconds apart must not read as travel.
 */
export function isImpossibleTravel(previous: PreviousLocation, current: ReportedPosition, reportedAt: string): boolean {
  const slack = (previous.accuracyMeters ?? 0) + (current.accuracyMeters ?? 0);
  const covered = haversineMeters(previous, current) - slack;
  if (covered <= 0) return false;
  // a previous time after this report (a profile set by hand) counts as no time at all
  const seconds = Math.max(0, (Date.parse(reportedAt) - Date.parse(previous.capturedAt)) / 1000);
  if (seconds === 0) return true;
  return (covered / seconds) * 3.6 > IMPOSSIBLE_TRAVEL_KMH;
}

/**
 * A change that sends both coordinates of a stored location must set both or clear both: one
 * null and the other not is no position (a site's location, a user profile's last location).
 */
export function assertBothOrNeither(latitude: [name: string, value: number | null | undefined], longitude: [name: string, value: number | null | undefined]): void {
  const [latName, lat] = latitude;
  const [lngName, lng] = longitude;
  if (lat === undefined || lng === undefined || (lat === null) === (lng === null)) return;
  const [cleared, other] = lat === null ? [latName, lngName] : [lngName, latName];
  throw invalidField(`/${cleared}`, `must not be null while ${other} is set: a location has both coordinates or neither`);
}
