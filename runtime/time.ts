/** Timestamps in responses: UTC with milliseconds (decisions.md §2). Stored in the same form, so text order is time order. */
export function nowIso(): string {
  return new Date().toISOString();
}

/** Normalizes an RFC 3339 date-time (already validated by the contract) to UTC with milliseconds. */
export function normalizeTimestamp(value: string): string {
  return new Date(value).toISOString();
}

export function normalizeOptionalTimestamp(value: string | null | undefined): string | null | undefined {
  return value === undefined || value === null ? value : normalizeTimestamp(value);
}
