#!/usr/bin/env bash
# The main job on a fresh machine: installs acp-green into .venv (the first time; needs Python
# 3.11 or newer), says on stderr where the `acp-green` an editor launches is, then runs
# `acp-green serve` on this process's stdin/stdout. Arguments go to `acp-green serve`.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/venv.sh" >&2  # stdout is the wire: an editor reads JSON-RPC from its first byte
echo "acp-green is installed at $here/.venv/bin/acp-green; for your editor's settings run: $here/.venv/bin/acp-green editor-config zed (or jetbrains)" >&2
exec "$here/.venv/bin/acp-green" serve "$@"
