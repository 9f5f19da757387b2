#!/usr/bin/env bash
# Mutation testing: mutates acp_green's core modules one line at a time (cosmic-ray) and runs
# each module's fastest covering tests against every mutant; prints the score per module and
# in total, and lists the mutants no test killed. Not part of scripts/test.sh (it takes long).
#   scripts/mutation.sh                    every module, every mutant
#   scripts/mutation.sh --module wire      one module (repeatable)
#   scripts/mutation.sh --quick [N]        a seeded random sample of N mutants per module (default 40)
#   scripts/mutation.sh --survivors        re-test only the last run's survivors (after adding tests)
#   scripts/mutation.sh --report           reprint the last run's scores and survivors
set -euo pipefail
cd "$(dirname "$0")/.."
COSMIC_RAY_VERSION=8.7.0  # pinned: its operators decide the mutants, so the score moves with it
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test,rig]'
fi
if [ "$(.venv/bin/cosmic-ray --version 2>/dev/null)" != "cosmic-ray, version $COSMIC_RAY_VERSION" ]; then
  .venv/bin/python -m pip install --quiet "cosmic-ray==$COSMIC_RAY_VERSION"
fi
exec .venv/bin/python scripts/mutation.py "$@"
