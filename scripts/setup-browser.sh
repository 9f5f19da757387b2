#!/usr/bin/env bash
# Installs headless Chromium from Debian's packages for the browser tests of `acp-green trace html`
# (tests/tools/test_trace_html_browser.py). Does nothing when chromium is already installed; fails,
# saying why, where it cannot install it (no apt-get, or not root), since CI must run those tests.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-browser: chromium is not installed and apt-get is not available to install it;" \
       "install Chromium with your system's package manager (the trace html browser tests need it)" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup-browser: installing chromium needs root: run 'apt-get install -y chromium' as root" >&2
    exit 1
  fi
  sudo=(sudo)
fi
echo "setup-browser: installing chromium (Debian's package) for the browser tests" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "setup-browser: apt-get finished but chromium is not on PATH" >&2; exit 1; }
