import type { components } from '../../generated/types';

export type IssueStatus = components['schemas']['IssueStatus'];

export interface IssueTimestamps {
  resolvedAt: string | null;
  closedAt: string | null;
}

/**
 * The server-kept timestamps after an issue moves from `from` to `to` (`from` undefined on
 * create). Any status may follow any other — issues are reopened in practice — so this never
 * refuses a move; it only keeps the timestamps truthful:
 * - reopening (`open`, `in_progress`) clears both: the earlier fix evidently did not hold;
 * - `resolved` stamps resolvedAt and clears closedAt (a closed issue reopened straight to resolved);
 * - `closed` stamps closedAt and keeps resolvedAt only when the issue was resolved before,
 *   so "closed without a fix" (won't fix, duplicate) stays distinguishable by resolvedAt = null;
 * - re-sending the current status changes nothing, so a retried PATCH does not move the clock.
 */
export function timestampsAfter(from: IssueStatus | undefined, current: IssueTimestamps, to: IssueStatus, now: string): IssueTimestamps {
  if (from === to) return current;
  switch (to) {
    case 'open':
    case 'in_progress':
      return { resolvedAt: null, closedAt: null };
    case 'resolved':
      return { resolvedAt: now, closedAt: null };
    case 'closed':
      return { resolvedAt: from === 'resolved' ? current.resolvedAt : null, closedAt: now };
  }
}
