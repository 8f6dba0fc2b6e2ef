/** Timestamps in responses: UTC with milliseconds (decisions.md §2). Stored in the same form, so text order is time order. */
export function nowIso(): string {
  return new Date().toISOString();
}

/** Normalizes an RFC 3339 date-time (already validated by the contract) to UTC with milliseconds. */
export function normalizeTimestamp(value: string): string {
  // RFC 3339 allows a leap second (:60), which Date cannot represent: it counts as the last
  // millisecond of its minute
  return new Date(value.replace(/:60(\.\d+)?(?=(Z|[+-]\d\d:\d\d)$)/i, ':59.999')).toISOString();
}

export function normalizeOptionalTimestamp(value: string | null | undefined): string | null | undefined {
  return value === undefined || value === null ? value : normalizeTimestamp(value);
}
