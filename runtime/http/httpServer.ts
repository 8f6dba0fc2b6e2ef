import http, { type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError, errorBody, type ErrorCode } from '../errors';
import { newRequestId } from '../ids';

export interface HttpServerSettings {
  requestTimeoutSeconds: number;
  maxBodyBytes: number;
}

/**
 * The HTTP server the API listens with: `app` behind Node's parser, with request timeouts and
 * the API's error body for what never reaches `app`.
 *
 * - Timeouts (REQUEST_TIMEOUT_SECONDS): a request's headers and body must arrive within it,
 *   checked every second (Node's default: five minutes, checked every 30 s, then a bare 408).
 *   The time to answer is not bounded: a request that arrived whole runs to its end.
 * - Requests Node's parser refuses (malformed HTTP, headers over 16 KB) and the timeouts are
 *   answered with `{error, code, requestId}` (README "Errors"), `X-Request-Id` and
 *   `Connection: close`, then the connection is closed — where Node sends a bare status line.
 * - A client that asks before sending its body (`Expect: 100-continue`, which curl and most
 *   HTTP libraries send for large bodies) and declares more than MAX_BODY_BYTES gets 413 at once,
 *   and never sends it. Without that header the body is read up to the limit before the 413
 *   (closing on a body still arriving could reach the client as a reset, losing the answer), and
 *   a client that stops sending gets the timeout's 408.
 * - An HTTP/1.1 request without `Host` gets the API's 400; an `Expect` other than 100-continue is
 *   ignored (Node would answer both with a bare status line).
 */
export function createHttpServer(app: RequestListener, settings: HttpServerSettings): Server {
  // Node answers an HTTP/1.1 request without Host itself, with a bare 400: refused here instead,
  // with the API's error body (RFC 9112 §3.2 requires Host of every HTTP/1.1 request)
  const server = http.createServer({ connectionsCheckingInterval: 1000, requireHostHeader: false }, (req, res) => {
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      answerError(res, new ApiError('VALIDATION_ERROR', 'An HTTP/1.1 request needs a Host header', [{ path: '/headers/host', message: 'is required' }]), true);
      return;
    }
    app(req, res);
  });
  server.requestTimeout = settings.requestTimeoutSeconds * 1000;
  server.headersTimeout = settings.requestTimeoutSeconds * 1000;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // as Node's own handler: nothing is written into a response already under way
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    if (!socket.writable || err.code === 'ECONNRESET' || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const [code, message] = describe(err, settings.requestTimeoutSeconds);
    socket.write(rawErrorAnswer(code, message));
    socket.destroySoon(); // once written: a client that never closes its side does not keep the connection
  });
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (Number(req.headers['content-length']) > settings.maxBodyBytes) {
      answerError(res, new ApiError('PAYLOAD_TOO_LARGE', `Request body is larger than ${settings.maxBodyBytes} bytes`), true);
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });
  // an expectation other than 100-continue: Node would answer a bare 417; the API has nothing to
  // meet it with and ignores it (RFC 9110 §10.1.1 lets a server do either), serving the request
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    server.emit('request', req, res);
  });
  return server;
}

/** The API's error answer on a response `app` never saw (its own X-Request-Id), closing the connection when `close`. */
function answerError(res: ServerResponse, error: ApiError, close: boolean): void {
  const requestId = newRequestId();
  const body = JSON.stringify(errorBody(error, requestId));
  res.writeHead(error.status, {
    'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'X-Request-Id': requestId,
    ...(close ? { Connection: 'close' } : {}),
  });
  res.end(body);
}

function describe(err: NodeJS.ErrnoException, requestTimeoutSeconds: number): [ErrorCode, string] {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return ['REQUEST_TIMEOUT', `The request did not arrive whole within ${requestTimeoutSeconds} s`];
    case 'HPE_HEADER_OVERFLOW':
      return ['HEADERS_TOO_LARGE', 'The request line and headers are larger than 16 KB'];
    default:
      return ['VALIDATION_ERROR', 'The request is not well-formed HTTP/1.1'];
  }
}

/** A whole HTTP/1.1 error answer, for a socket no response object owns. */
function rawErrorAnswer(code: ErrorCode, message: string): string {
  const requestId = newRequestId();
  const error = new ApiError(code, message);
  const body = JSON.stringify(errorBody(error, requestId));
  const status = error.status;
  return `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`;
}

const REASONS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
