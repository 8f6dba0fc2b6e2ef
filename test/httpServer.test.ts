import net from 'node:net';
import { describeEachDatabase } from './support/testApp';
import { startServerProcess, ServerProcess } from './support/serverProcess';

// What a client gets for requests express never sees (runtime/http/httpServer.ts): a request
// that stalls, one that is not well-formed HTTP, headers too large — the API's error body, never
// Node's bare status line, and never a connection held for minutes. And a declared body over
// MAX_BODY_BYTES answered at once, without waiting for it. Through a real server process and a
// raw socket, with REQUEST_TIMEOUT_SECONDS=1.

/** Sends `chunks` (the last left unfinished when the client stalls) and reads until the server closes. */
function exchange(baseUrl: string, chunks: (string | Buffer)[]): Promise<{ text: string; closedAfterMs: number }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(Number(port), hostname);
    let text = '';
    // a guard against the hang this file is about: far longer than the 1 s the server allows
    const guard = setTimeout(() => { socket.destroy(); reject(new Error(`no close after 20 s; got: ${text}`)); }, 20_000);
    socket.on('connect', () => { for (const chunk of chunks) socket.write(chunk); });
    socket.on('data', (d) => { text += d.toString('latin1'); });
    socket.on('error', () => undefined); // a reset after the answer still ends the exchange
    socket.on('close', () => { clearTimeout(guard); resolve({ text, closedAfterMs: Date.now() - started }); });
  });
}

function parse(text: string): { status: number; headers: string; body: any } {
  const [head, ...rest] = text.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body: JSON.parse(rest.join('\r\n\r\n')) };
}

const anErrorBody = (code: string) => ({ error: expect.any(String), code, requestId: expect.stringMatching(/^req_[0-9a-f]{20}$/) });

describeEachDatabase('requests that never reach the app', (t) => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ databaseUrl: t.db.url, env: { REQUEST_TIMEOUT_SECONDS: '1' } });
  }, 60_000);
  afterAll(async () => { await server?.stop(); });

  const post = (headers: string[]) => `POST /v1/sites HTTP/1.1\r\nHost: x\r\nAuthorization: ${t.auth}\r\nContent-Type: application/json\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`;

  it('a body that stops arriving: 408 REQUEST_TIMEOUT in the error body, the connection closed, nothing stored', async () => {
    const { text } = await exchange(server.baseUrl, [post(['Content-Length: 100']), '{"name":"st']);
    const answer = parse(text);
    expect(answer.status).toBe(408);
    expect(answer.headers).toContain('connection: close');
    expect(answer.body).toEqual(anErrorBody('REQUEST_TIMEOUT'));
    expect(await t.db.knex('sites').count({ n: '*' })).toEqual([{ n: 0 }]);
  });

  it('headers that never end: 408 REQUEST_TIMEOUT', async () => {
    const { text } = await exchange(server.baseUrl, ['GET /v1/sites HTTP/1.1\r\nHost: x\r\nAuthorization: Bea']);
    expect(parse(text)).toMatchObject({ status: 408, body: anErrorBody('REQUEST_TIMEOUT') });
  });

  it('a request that is not well-formed HTTP (a control character in a header, two lengths): 400 VALIDATION_ERROR', async () => {
    for (const request of [
      post(['Idempotency-Key: a\x01b', 'Content-Length: 2']) + '{}',
      post(['Content-Length: 2', 'Content-Length: 3']) + '{}',
      'HELLO\r\n\r\n',
    ]) {
      const { text } = await exchange(server.baseUrl, [Buffer.from(request, 'latin1')]);
      expect(parse(text)).toMatchObject({ status: 400, body: anErrorBody('VALIDATION_ERROR') });
    }
  });

  it('headers over 16 KB: 431 HEADERS_TOO_LARGE', async () => {
    const { text } = await exchange(server.baseUrl, [`GET /v1/sites?cursor=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`]);
    expect(parse(text)).toMatchObject({ status: 431, body: anErrorBody('HEADERS_TOO_LARGE') });
  });

  it('a declared body over MAX_BODY_BYTES: 413 at once, before the body is sent, and the connection closed', async () => {
    // only the headers are sent: the answer must not wait for the 2 MB it announces
    const { text } = await exchange(server.baseUrl, [post(['Content-Length: 2000000'])]);
    const answer = parse(text.slice(text.indexOf('HTTP/1.1 413')));
    expect(answer.status).toBe(413);
    expect(answer.headers).toContain('connection: close');
    expect(answer.body).toEqual(anErrorBody('PAYLOAD_TOO_LARGE'));
  });

  it('a request that arrives whole is answered as usual on the same server', async () => {
    const body = '{"name":"Whole"}';
    const { text } = await exchange(server.baseUrl, [post([`Content-Length: ${body.length}`, 'Connection: close']) + body]);
    expect(parse(text)).toMatchObject({ status: 201, body: { name: 'Whole' } });
  });
});
