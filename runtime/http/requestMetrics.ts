import type { NextFunction, Request, Response } from 'express';
import { metrics } from '../observability/metrics';
import { contextOf } from './requestContext';

/** Counts and times every request, in flight and done (mounted before the routes). */
export function requestMetrics() {
  return (req: Request, res: Response, next: NextFunction): void => {
    metrics.inFlight.inc();
    const end = metrics.duration.startTimer();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      metrics.inFlight.dec();
      // closed before its answer was sent whole: not the status it never got (200 by default)
      const labels = { operation: contextOf(res).operationId ?? 'none', status: res.writableFinished ? String(res.statusCode) : 'aborted' };
      end(labels);
      metrics.requests.inc(labels);
      if (res.getHeader('Idempotent-Replayed') === 'true') metrics.idempotentReplays.inc();
      const code = contextOf(res).errorCode;
      if (code === 'IDEMPOTENCY_KEY_REUSED' || code === 'IDEMPOTENCY_IN_PROGRESS') metrics.idempotencyConflicts.inc({ code });
    };
    res.on('finish', finish);
    res.on('close', finish);
    next();
  };
}
