/**
 * For the record: bare node:http serving the read scenario's row (same prepared statement as
 * the framework floor). Shows what express itself costs on this machine.
 *
 * Env: PORT, HOST, FLOOR_DB, FLOOR_ORG_ID.
 */
import http from 'node:http';
import Database from 'better-sqlite3';

const db = new Database(process.env.FLOOR_DB!);
db.pragma('journal_mode = WAL');
db.pragma('busy_timeout = 5000');
const orgId = process.env.FLOOR_ORG_ID!;
const readCheckin = db.prepare('select * from checkins where org_id = ? and id = ?');
const PREFIX = '/v1/checkins/';

http
  .createServer((req, res) => {
    const url = req.url ?? '/';
    let status = 404;
    let body = '{"code":"NOT_FOUND"}';
    if (url === '/healthz') {
      status = 200;
      body = '{"status":"ok"}';
    } else if (req.method === 'GET' && url.startsWith(PREFIX)) {
      const row = readCheckin.get(orgId, url.slice(PREFIX.length));
      if (row) {
        status = 200;
        body = JSON.stringify(row);
      }
    }
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  })
  .listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
