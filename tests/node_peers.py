"""Where the tests find the Node peers (tests/node) and the one reason they skip without node.

scripts/test.sh installs the peers (scripts/setup-node.sh) whenever node is present, so a missing
package then is a broken setup and fails the test; only a machine without node skips them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

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
