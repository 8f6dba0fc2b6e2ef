import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real local HTTP server standing in for a webhook receiver: it records every request
 * (headers, raw body, arrival time) and answers what the test scripts, per request number.
 */
export interface ReceivedRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering (a slow receiver, a timeout). */
  delayMs?: number;
  /** Never answer (until the server closes). */
  hang?: boolean;
  /** Send the status, the headers and the body, then never end the answer. */
  hangBody?: boolean;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedRequest[];
  /** Answers the n-th request (0-based) to a path; 200 by default. */
  answer(fn: (request: ReceivedRequest, index: number) => Answer): void;
  /** Resolves when `count` requests arrived (matching `path` when given); fails after `timeoutMs`. */
  waitFor(count: number, options?: { path?: string; timeoutMs?: number }): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedRequest[] = [];
  let answerFn: (request: ReceivedRequest, index: number) => Answer = () => ({ status: 200, body: 'ok' });
  const waiters = new Set<() => void>();
  /** Answers waiting for their delay: close() drops them, so that none keeps the test process alive. */
  const answering = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request: ReceivedRequest = {
        path: req.url ?? '/',
        headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)])),
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      const index = received.filter((r) => r.path === request.path).length;
      received.push(request);
      waiters.forEach((w) => w());
      const answer = answerFn(request, index);
      if (answer.hang) return;
      const timer = setTimeout(() => {
        answering.delete(timer);
        res.writeHead(answer.status, answer.headers);
        if (answer.hangBody) res.write(answer.body ?? '');
        else res.end(answer.body ?? '');
      }, answer.delayMs ?? 0);
      answering.add(timer);
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answer(fn) {
      answerFn = fn;
    },
    waitFor(count, options = {}) {
      const matching = () => received.filter((r) => options.path === undefined || r.path === options.path);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (matching().length >= count) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(matching());
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`expected ${count} webhook requests${options.path ? ` to ${options.path}` : ''}, got ${matching().length}`));
        }, options.timeoutMs ?? 10_000);
        waiters.add(check);
        check();
      });
    },
    close() {
      for (const timer of answering) clearTimeout(timer);
      answering.clear();
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
