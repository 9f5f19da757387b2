#!/usr/bin/env bash
# Runs the test suite, installing what it needs into .venv first.
#   scripts/test.sh            the default tier (a few minutes on 2 cores)
#   scripts/test.sh --slow     the default tier plus the slow one (long soaks, CPU-hog runs, fresh installs)
# Other arguments go to pytest (for example: scripts/test.sh -k S11).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
tier=(-m "not slow")
args=()
for arg in "$@"; do
  if [ "$arg" = "--slow" ]; then tier=(); else args+=("$arg"); fi
done
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,rig]'
# Node test peers (the TypeScript SDK); without node those tests skip and say why.
scripts/setup-node.sh
exec .venv/bin/python -m pytest -n auto "${tier[@]}" "${args[@]}"
