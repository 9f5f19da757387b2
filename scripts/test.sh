#!/usr/bin/env bash
# Runs the test suite, installing what it needs first: .venv with the package and the test tools
# (scripts/venv.sh), and where node is present the Node test peers (scripts/setup-node.sh);
# without node those tests skip, saying why.
#   scripts/test.sh            the default tier (about 10 minutes on 2 cores; slower beside other work)
#   scripts/test.sh --slow     the default tier plus the slow one (long soaks, CPU-hog runs, fresh installs)
# Other arguments go to pytest (for example: scripts/test.sh -k S11).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-m "not slow")
args=()
for arg in "$@"; do
  if [ "$arg" = "--slow" ]; then tier=(); else args+=("$arg"); fi
done
scripts/venv.sh test,rig
scripts/setup-node.sh
exec .venv/bin/python -m pytest -n auto "${tier[@]}" "${args[@]}"
