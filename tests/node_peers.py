"""Where the tests find the Node peers (tests/node) and the one reason they skip without node.

scripts/test.sh installs the peers (scripts/setup-node.sh) whenever node is present, so a missing
package then is a broken setup and fails the test; only a machine without node skips them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
NO_NODE_REASON = ("node is not installed: the Node peers in tests/node (TypeScript SDK, conductor, acpx) "
                  "cannot run; install node and npm, then scripts/test.sh installs them")

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason=NO_NODE_REASON)


def require_node_package(*parts: str) -> Path:
    """The path of an installed peer under tests/node/node_modules, or a failed test naming the fix."""
    path = NODE_DIR.joinpath("node_modules", *parts)
    if not path.exists():
        pytest.fail(f"tests/node/node_modules lacks {'/'.join(parts)}: run scripts/test.sh "
                    "(it installs the Node peers with scripts/setup-node.sh)")
    return path


def peer_report(script: str, workdir: Path, *serve_args: str, cwd: str | None = None) -> dict[str, Any]:
    """Run the peer tests/node/SCRIPT against `acp-green serve SERVE_ARGS` (over its pipes) and
    return the JSON report it prints; a peer that exits non-zero fails the test with its stderr."""
    return run_peer(script, str(workdir), "--", sys.executable, "-m", "acp_green", "serve", *serve_args, cwd=cwd)


def run_peer(script: str, *args: str, cwd: str | None = None) -> dict[str, Any]:
    """Run `node tests/node/SCRIPT ARGS...` and return the JSON report it prints; a peer that exits
    non-zero fails the test with its stderr (a peer of an agent it does not launch, such as one
    that connects to `acp-green serve --listen`, takes what it needs in ARGS)."""
    done = subprocess.run(["node", str(NODE_DIR / script), *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
