import http from 'node:http';
import https from 'node:https';
import { checkLiteralHost, safeLookup, TargetNotAllowedError } from './webhookTargets';

export interface AttemptOutcome {
  /** The answer's status, or null when there was none (timeout, refused, not allowed). */
  status: number | null;
  /** The first characters of the answer's body, or the error. */
  excerpt: string;
  /** Seconds from a `Retry-After` header of a 429 or 503. */
  retryAfterSeconds?: number;
}

export interface SendOptions {
  timeoutMs: number;
  allowPrivate: boolean;
}

/** Whether the target accepted the message: any 2xx (a 3xx is not followed, so it is not one). */
export function accepted(outcome: AttemptOutcome): boolean {
  return outcome.status !== null && outcome.status >= 200 && outcome.status < 300;
}

const EXCERPT_CHARS = 200;

/**
 * The excerpt of an answer or error as stored and shown: at most EXCERPT_CHARS characters, control
 * characters (C0 but tab and line breaks, DEL, C1) as U+FFFD. A receiver may answer anything (binary,
 * compressed): Postgres refuses a NUL in text, and a result that could not be stored would leave
 * its delivery to be sent again and again.
 */
function excerptText(text: string): string {
  return text.slice(0, EXCERPT_CHARS).replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/g, '\uFFFD');
}

/** More of an answer than this is not read: it is never shown, and a receiver must not hold a worker. */
const MAX_READ_BYTES = 64 * 1024;

// keep-alive: a healthy receiver gets many deliveries over one connection; new connections go
// through safeLookup again
const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 64 }), https: new https.Agent({ keepAlive: true, maxSockets: 64 }) };

/**
 * One POST of a signed delivery. Redirects are not followed (node's client never does; a 3xx is
 * simply not a 2xx); the whole attempt, connection to the end of the answer, is bounded by
 * `timeoutMs`. An answer whose status came in time but whose body did not end by then is judged
 * by its status (a 2xx succeeds), its excerpt what arrived and a note that the rest did not.
 * Never throws: every failure is an outcome.
 */
export function postWebhook(targetUrl: string, headers: Record<string, string>, body: string, options: SendOptions): Promise<AttemptOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    let url: URL;
    try {
      url = new URL(targetUrl);
      checkLiteralHost(url, options.allowPrivate);
    } catch (err) {
      return finish({ status: null, excerpt: excerptOf(err) });
    }
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, {
      method: 'POST',
      agent: url.protocol === 'https:' ? agents.https : agents.http,
      lookup: safeLookup(options.allowPrivate),
      headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': 'fieldops-webhooks/1' },
    });
    // set once the status and headers arrived: what the timeout then answers with
    let answered: ((note: string) => void) | undefined;
    timer = setTimeout(() => {
      const message = `timed out after ${options.timeoutMs / 1000} s`;
      answered?.(` [the rest of the answer did not arrive: ${message}]`);
      req.destroy(new Error(message));
    }, options.timeoutMs);
    req.on('error', (err) => finish({ status: null, excerpt: excerptOf(err) }));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        if (read < MAX_READ_BYTES) chunks.push(chunk);
        read += chunk.length;
        if (read >= MAX_READ_BYTES) res.destroy();
      });
      const done = (note = '') => {
        const status = res.statusCode ?? 0;
        // the note stays whole however long the part that arrived
        const text = excerptText(Buffer.concat(chunks).toString('utf8').slice(0, EXCERPT_CHARS - note.length) + note);
        const retryAfter = status === 429 || status === 503 ? parseRetryAfter(res.headers['retry-after']) : undefined;
        finish({ status, excerpt: text, ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }) });
      };
      answered = done;
      res.on('end', () => done());
      res.on('close', () => done());
      res.on('error', () => done());
    });
    req.end(body);
  });
}

function excerptOf(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return excerptText(err instanceof TargetNotAllowedError ? `TARGET_NOT_ALLOWED: ${message}` : message);
}

/** `Retry-After` as seconds: delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}
