#!/usr/bin/env bash
# Soak run: N agents in parallel for a duration under a seeded random mix; invariants checked
# continuously, RSS / open fds / greenlets sampled; fails on a broken invariant or a growing
# resource. Writes soak-results/summary.json, samples.json and memory.png.
#
#   scripts/soak.sh [--duration 60] [--agents 4] [--seed 1] [--out soak-results] [-- COMMAND...]
#
# Default COMMAND: acp-green serve with a fresh state directory under the output directory.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# matplotlib draws the plot; it is an optional extra, never a runtime dependency.
.venv/bin/python -c 'import acp_green, jsonschema, matplotlib' 2>/dev/null \
  || .venv/bin/python -m pip install --quiet -e '.[rig,plot]'
out=soak-results
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --) break ;;
    --out) out=${args[$((i + 1))]} ;;
    --out=*) out=${args[$i]#--out=} ;;
  esac
done
has_command=no
for a in "$@"; do [ "$a" = "--" ] && has_command=yes; done
if [ "$has_command" = no ]; then
  state="$out/state"
  rm -rf "$state"
  mkdir -p "$state"
  set -- "$@" -- .venv/bin/python -m acp_green serve --state-dir "$state"
fi
exec .venv/bin/python -m acp_green.rig.soak "$@"
