#!/usr/bin/env bash
# Runs the whole test suite, installing what it needs into .venv first.
# Extra arguments go to pytest (for example: scripts/test.sh -k S11).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,rig]'
exec .venv/bin/python -m pytest -n auto "$@"
