#!/usr/bin/env bash
# Runs `acp-green bench` (issue 6's W1-W6) against acp_green and the peers, side by side.
# Installs what it needs first: the package with matplotlib into .venv, the peers' SDKs into
# .bench-cache/. Results go to bench-results/<UTC stamp>.{json,png,txt}.
# Extra arguments go to `acp-green bench` (for example: scripts/bench.sh --repeat 5 -w W1).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e '.[rig,plot]'
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p bench-results
echo "load before: $(cat /proc/loadavg 2>/dev/null || uptime)" >&2
.venv/bin/acp-green bench --install-peers \
  --json "bench-results/$stamp.json" --chart "bench-results/$stamp.png" "$@" | tee "bench-results/$stamp.txt"
