#!/usr/bin/env bash
# Runs `acp-green bench` (W1-W8) against acp_green and the peers, side by side.
# Installs what it needs first: the package with matplotlib into .venv, the peers' SDKs (and the
# MCP SDK, for W8) into .bench-cache/. Results go to bench-results/<UTC stamp>.{json,png,txt}.
#   scripts/bench.sh [--doc] [ARGS...]
# --doc: also copy the results to docs/benchmarks/latest.{json,png,txt} and regenerate
# docs/BENCHMARKS.md from that one results file. Other arguments go to `acp-green bench`
# (for example: scripts/bench.sh --repeat 5 -w W1).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
doc=0
if [ "${1:-}" = "--doc" ]; then doc=1; shift; fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet -e '.[rig,plot]'
stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p bench-results
echo "load before: $(cat /proc/loadavg 2>/dev/null || uptime)" >&2
.venv/bin/acp-green bench --install-peers \
  --json "bench-results/$stamp.json" --chart "bench-results/$stamp.png" "$@" | tee "bench-results/$stamp.txt"
if [ "$doc" = 1 ]; then
  mkdir -p docs/benchmarks
  for ext in json png txt; do
    if [ -f "bench-results/$stamp.$ext" ]; then cp "bench-results/$stamp.$ext" "docs/benchmarks/latest.$ext"; fi
  done
  .venv/bin/python -m acp_green.tools.bench.doc docs/benchmarks/latest.json docs/BENCHMARKS.md
  echo "wrote docs/BENCHMARKS.md from docs/benchmarks/latest.json" >&2
fi
