#!/usr/bin/env bash
# Creates .venv in this checkout (once) and installs acp-green into it, editable, with the extras
# named in $1 (for example "test,rig"); does nothing when that install is already up to date.
#   PYTHON=/path/to/python3.12 scripts/venv.sh    use another interpreter (3.11 or newer)
# A virtual environment is what makes this work on a distribution's Python (PEP 668: pip refuses
# to install into it) as well as on pyenv's or python.org's.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-}
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  if ! command -v "$PY" >/dev/null 2>&1; then
    echo "acp-green needs Python 3.11 or newer: $PY was not found (set PYTHON=/path/to/python3.11 to use another)" >&2
    exit 1
  fi
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "acp-green needs Python 3.11 or newer; $PY is $("$PY" -c 'import platform; print(platform.python_version())')." \
         "Install a newer one (pyenv, python.org or your distribution) and run again with PYTHON=/path/to/it" >&2
    exit 1
  fi
  rm -rf .venv  # a half-made one (venv failed before pip was in it) would fail the same way again
  if ! "$PY" -m venv .venv; then
    rm -rf .venv
    echo "acp-green: $PY cannot create a virtual environment (on Debian/Ubuntu: sudo apt install python3-venv)" >&2
    exit 1
  fi
fi
stamp=".venv/.installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ setup.py -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/venv.sh -nt "$stamp" ]; then
  # The editable install puts the checkout on sys.path through a .pth file (setup.py's package_dir
  # asks for that rather than setuptools' import hook), which is the point of it: edits take effect
  # at once, new modules included, and mypy run on an agent anywhere follows the .pth to acp_green.
  # setuptools says so in a banner on every install. Only that notice is silenced.
  echo "acp-green: installing into .venv${extras:+ with the extras $extras} (the first time takes a minute or two)..." >&2
  PYTHONWARNINGS="ignore:Editable installation." \
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
