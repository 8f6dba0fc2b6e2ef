// The API server as a child process for the measurements in this folder: `node <nodeOptions>
// dist/runtime/main.js` on a fresh SQLite file, rate limits off, quiet logs. Resolves once it
// printed its first API key (a new database creates one), with that key's secret.
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { spawn } = require('node:child_process');
const ENTRY = path.join(__dirname, '..', '..', 'dist', 'runtime', 'main.js');

async function startServer(nodeOptions, port) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fop-micro-'));
  const server = spawn(process.execPath, [...nodeOptions, ENTRY], {
    env: { ...process.env, DATABASE_URL: `sqlite://${path.join(dir, 'db.sqlite')}`, PORT: String(port), LOG_LEVEL: 'warn', RATE_LIMIT_STORE: 'off' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const secret = await new Promise((resolve, reject) => {
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /fop_[A-Za-z0-9_-]+/.exec(out);
      if (match && out.includes('curl')) resolve(match[0]);
    });
    server.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  return {
    pid: server.pid,
    secret,
    async stop() {
      server.kill('SIGTERM');
      await new Promise((resolve) => server.once('exit', resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

module.exports = { startServer };
