#!/usr/bin/env bash
# Installs a third-party ACP agent into a cached virtualenv and probes it with `acp-green probe`.
# Not run by the test suite (it downloads from PyPI). Arguments go to `acp-green probe`:
#
#   scripts/probe-third-party.sh [--json] [--check NAME]... [--timeout SECONDS]
#
# The agent: fast-agent (PyPI `fast-agent-mcp`, FAST_AGENT_VERSION, default the version
# docs/PROBE.md reports), run as `fast-agent acp --model passthrough`: no login and no model key,
# it answers each prompt with the prompt's own text. fast-agent needs Python 3.12 or newer:
# FAST_AGENT_PYTHON names the interpreter (default: the newest python3.1x found). The venv is
# cached in ${XDG_CACHE_HOME:-~/.cache}/acp-green/third-party/fast-agent-VERSION; delete it to
# reinstall. The answer timeout defaults to 60 s: fast-agent takes seconds to start.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSION=${FAST_AGENT_VERSION:-0.10.48}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/acp-green/third-party/fast-agent-$VERSION
if [ ! -x "$CACHE/bin/fast-agent" ]; then
  AGENT_PY=${FAST_AGENT_PYTHON:-}
  if [ -z "$AGENT_PY" ]; then
    for candidate in python3.15 python3.14 python3.13 python3.12; do
      if command -v "$candidate" >/dev/null; then AGENT_PY=$candidate; break; fi
    done
  fi
  if [ -z "$AGENT_PY" ]; then
    echo "fast-agent $VERSION needs Python 3.12 or newer: set FAST_AGENT_PYTHON to one" >&2
    exit 1
  fi
  "$AGENT_PY" -m venv "$CACHE"
  "$CACHE/bin/python" -m pip install --quiet "fast-agent-mcp==$VERSION"
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -c 'import acp_green' 2>/dev/null || .venv/bin/python -m pip install --quiet -e .
# fast-agent looks for its config in the working directory: give it an empty one.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
"$ROOT/.venv/bin/python" -m acp_green probe --timeout 60 "$@" -- "$CACHE/bin/fast-agent" acp --model passthrough
