import { randomUUID } from 'node:crypto';
import http, { type RequestListener, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERROR_CODES, type ErrorCode } from '../errors';

/**
 * The HTTP server the API listens with: `app` behind Node's parser, with the request timeouts
 * and the error answers below.
 */
export function createHttpServer(app: RequestListener, { requestTimeoutSeconds }: { requestTimeoutSeconds: number }): Server {
  // timeouts are checked every second (Node's default is every 30 s, on top of the timeout)
  const server = http.createServer({ connectionsCheckingInterval: 1000 }, app);
  answerClientErrorsInJson(server, requestTimeoutSeconds);
  return server;
}

/**
 * Requests that never reach express: Node's HTTP parser refuses a malformed request line or
 * header, headers too large, or a request whose headers or body did not arrive within the
 * server's timeouts. Node's own answer is a bare status line; this one is the API's error body
 * (`{error, code, requestId}`, docs: README "Errors") with `Connection: close`.
 *
 * Timeouts (REQUEST_TIMEOUT_SECONDS): the whole request, headers and body, must arrive within
 * it. Without them a client that stalls mid-body holds its connection for Node's default five
 * minutes and then gets a bare 408. The time to answer is not bounded here: a request that
 * arrived whole runs to its end.
 */
function answerClientErrorsInJson(server: Server, requestTimeoutSeconds: number): void {
  server.requestTimeout = requestTimeoutSeconds * 1000;
  server.headersTimeout = requestTimeoutSeconds * 1000;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const [code, message] = describe(err, requestTimeoutSeconds);
    const body = JSON.stringify({ error: message, code, requestId: `req_${randomUUID().replace(/-/g, '').slice(0, 20)}` });
    const status = ERROR_CODES[code];
    socket.end(
      `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
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

const REASONS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };
