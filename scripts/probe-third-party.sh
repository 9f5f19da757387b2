#!/usr/bin/env bash
# Installs a third-party ACP agent into a cached virtualenv and probes it with `acp-green probe`.
# Not run by the test suite (it downloads from PyPI). Arguments go to `acp-green probe`:
#
#   scripts/probe-third-party.sh [--json] [--check NAME]...
#
# The agent: fast-agent (PyPI `fast-agent-mcp`, version FAST_AGENT_VERSION, default the one
# docs/PROBE.md reports), run as `fast-agent acp --model passthrough`, which needs no login and no
# model key: it answers each prompt with the prompt's own text. The cache lives in
# ${XDG_CACHE_HOME:-~/.cache}/acp-green/third-party/fast-agent-VERSION; delete it to reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VERSION=${FAST_AGENT_VERSION:-0.4.5}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/acp-green/third-party/fast-agent-$VERSION
if [ ! -x "$CACHE/bin/fast-agent" ]; then
  "$PY" -m venv "$CACHE"
  "$CACHE/bin/python" -m pip install --quiet "fast-agent-mcp==$VERSION"
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -c 'import acp_green' 2>/dev/null || .venv/bin/python -m pip install --quiet -e .
# fast-agent keeps its config and history in the working directory: give it an empty one.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
exec "$OLDPWD/.venv/bin/python" -m acp_green probe \
  --long-prompt "$(printf 'word %.0s' $(seq 400))" "$@" -- "$CACHE/bin/fast-agent" acp --model passthrough
