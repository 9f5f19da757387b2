#!/usr/bin/env bash
# Runs `acp-green soak` from .venv, installing the package with the rig and plot extras first
# (jsonschema for the checks, matplotlib for memory.png). Arguments go to `acp-green soak`:
#
#   scripts/soak.sh [--duration 120] [--warmup 60] [--agents 4] [--seed 1] [--out soak-results] [-- COMMAND...]
#
# `acp-green soak --help` lists every option. Growth is judged only on the second half of a run at
# least twice --warmup long; a shorter run ends INCONCLUSIVE (exit 0) and says how long to run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -c 'import acp_green, jsonschema, matplotlib' 2>/dev/null \
  || .venv/bin/python -m pip install --quiet -e '.[rig,plot]'
exec .venv/bin/python -m acp_green soak "$@"
