#!/usr/bin/env bash
# The production install, end to end, on a copy of this checkout: `npm ci --omit=dev` (no
# development dependency), then the documented start command and the key CLI, then SIGTERM.
# Run by .ci/run; about 1–2 minutes with a cold npm cache, less with a warm one.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill "$SERVER_PID"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

git ls-files -z --cached --others --exclude-standard | grep -zv '^node_modules$' | tar --null -cf - -T - | tar -xf - -C "$WORK"
cd "$WORK"
npm ci --omit=dev --prefer-offline --no-audit --no-fund --loglevel=error
test ! -e node_modules/jest && test ! -e node_modules/tsx || { echo "development dependencies were installed"; exit 1; }

export DATABASE_URL="sqlite:data/production-check.sqlite" PORT=0 LOG_LEVEL=info
npm start > server.log 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 60); do grep -q '"msg":"listening"' server.log && break; sleep 0.5; done
ADDRESS="$(grep -o '"address":"[^"]*"' server.log | head -n 1 | cut -d'"' -f4)"
[ -n "$ADDRESS" ] || { echo "the server did not start:"; cat server.log; exit 1; }

curl -fsS "$ADDRESS/readyz" | grep -q '"migrations":"current"'
SECRET="$(npm run --silent keys -- create --scopes sites:read --name production-check | tail -n 1)"
test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SECRET" "$ADDRESS/v1/sites")" = 200
npm run --silent keys -- list | grep -q production-check

# SIGTERM to the server itself, as a process manager running `node --max-semi-space-size=4 --heap-growing-percent=100 dist/runtime/main.js` sends
# it (npm passes signals on, but reports a signal of its own as a failure)
NODE_PID="$SERVER_PID"
for _ in 1 2 3; do CHILD="$(pgrep -P "$NODE_PID" | head -n 1 || true)"; [ -n "$CHILD" ] && NODE_PID="$CHILD"; done
kill -TERM "$NODE_PID"
wait "$SERVER_PID" && STATUS=0 || STATUS=$?
SERVER_PID=""
[ "$STATUS" = 0 ] || { echo "npm start exited $STATUS after SIGTERM"; cat server.log; exit 1; }
echo "production install: npm ci --omit=dev, npm start, npm run keys and SIGTERM all work"
