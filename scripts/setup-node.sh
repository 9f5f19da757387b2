#!/usr/bin/env bash
# Installs the Node test peers (@agentclientprotocol/sdk, @thinkwell/conductor and the acpx client,
# pinned in tests/node/package-lock.json) into tests/node/node_modules. Does nothing without node:
# the tests that need them then skip, saying why.
# The lock lists every platform build of @openclaw/fs-safe (an optional dependency of acpx) although
# the registry reachable here serves only the linux-x64 ones: without those entries `npm ci` refuses
# the lock as out of sync; npm skips builds for other platforms (and fs-safe runs without any).
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
if ! command -v node >/dev/null 2>&1; then
  echo "setup-node: node is not installed; the tests that need the Node peers (TypeScript SDK, conductor, acpx) will be skipped" >&2
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup-node: node is installed but npm is not; install npm so the Node peers can be installed" >&2
  exit 1
fi
if [ -d node_modules/@agentclientprotocol/sdk ] && [ -d node_modules/@thinkwell/conductor ] && [ -x node_modules/.bin/acpx ] && [ -d node_modules/ws ] \
   && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0  # already installed from this lock file
fi
npm ci --no-audit --no-fund --loglevel=error
