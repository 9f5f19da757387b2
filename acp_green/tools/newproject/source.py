"""Where the running acp-green can be installed from again, for the ci.sh of a project it makes.

acp-green is not on every package index a project's ci.sh reaches (a checkout or a wheel of it may
be all there is), so `acp-green new` records the source it was itself installed from: the checkout
it runs from (an editable install, or PYTHONPATH), else the local directory or wheel pip installed
it from (PEP 610's direct_url.json). None when it came from a package index, which ci.sh then uses.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

#: This acp_green package's directory (…/acp_green), from this module's place in it.
PACKAGE_DIR = Path(__file__).resolve().parents[2]


def acp_green_source() -> str | None:
    """An absolute path pip can install this acp-green from (a checkout or a wheel), or None."""
    return _checkout(PACKAGE_DIR) or _installed_from(PACKAGE_DIR)


def _checkout(package_dir: Path) -> str | None:
    """The source tree `package_dir` sits in, when it is one (its build files beside it)."""
    root = package_dir.parent
    if (root / "setup.py").is_file() and (root / "pyproject.toml").is_file():
        return str(root)
    return None


def _installed_from(package_dir: Path) -> str | None:
    """The local directory or wheel pip installed the distribution that holds `package_dir` from, if it still exists."""
    try:
        dist = metadata.distribution("acp-green")
    except metadata.PackageNotFoundError:
        return None
    if Path(str(dist.locate_file("acp_green"))).resolve() != package_dir:
        return None  # another copy's metadata: it says nothing of this one
    try:
        record = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    url = record.get("url") if isinstance(record, dict) else None
    if not isinstance(url, str) or not url.startswith("file://"):
        return None  # a package index, or a VCS or remote URL ci.sh cannot count on
    path = Path(unquote(urlsplit(url).path))
    return str(path) if path.exists() else None
