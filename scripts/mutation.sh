#!/usr/bin/env bash
# Mutation testing: mutates the runtime's modules and the rig's verdict code one line at a time
# (cosmic-ray) and runs each module's fastest covering tests against every mutant; prints the
# score per group and module and in total, the seconds one mutant takes, and lists the mutants
# no test killed. Not part of scripts/test.sh (it takes long). The table of modules, their group
# and their test files is MODULES in scripts/mutation.py.
#   scripts/mutation.sh                       every module, every mutant
#   scripts/mutation.sh --module wire         one module (repeatable)
#   scripts/mutation.sh --group protocol      one group of modules (repeatable)
#   scripts/mutation.sh --quick [N]           a seeded random sample of N mutants PER GROUP (default 30),
#                                             spread over the group's modules (each gets one while N lasts)
#   scripts/mutation.sh --survivors           re-test only the last run's survivors (after adding tests)
#   scripts/mutation.sh --report              reprint the last run's scores and survivors
# The virtualenv: $MUTATION_VENV if set, else this checkout's .venv, else (in a git worktree
# without one) the main checkout's .venv; made here only if none exists. The tests always import
# the copy of this tree being mutated (PYTHONPATH), whatever that virtualenv has installed.
set -euo pipefail
cd "$(dirname "$0")/.."
COSMIC_RAY_VERSION=8.7.0  # pinned: its operators decide the mutants, so the score moves with it
PY=${PYTHON:-python3}
VENV=${MUTATION_VENV:-}
if [ -z "$VENV" ]; then
  VENV=.venv
  main_checkout=$(dirname "$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo .git)")
  if [ ! -x "$VENV/bin/python" ] && [ -x "$main_checkout/.venv/bin/python" ]; then
    VENV=$main_checkout/.venv
  fi
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e '.[test,rig]'
fi
if [ "$("$VENV/bin/cosmic-ray" --version 2>/dev/null)" != "cosmic-ray, version $COSMIC_RAY_VERSION" ]; then
  "$VENV/bin/python" -m pip install --quiet "cosmic-ray==$COSMIC_RAY_VERSION"
fi
exec "$VENV/bin/python" scripts/mutation.py "$@"
