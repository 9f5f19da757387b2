"""Console entry point (`acp-green`, `python -m acp_green`).

`--monkey-patch` must act before anything else is imported (gevent's rule), so it is looked
for here, ahead of click and the rest of the package.
"""

from __future__ import annotations

import sys


def main() -> None:
    if "serve" in sys.argv[1:] and "--monkey-patch" in sys.argv[1:]:
        from gevent import monkey

        monkey.patch_all()  # ok: only with --monkey-patch, before anything else is imported
    from .cli import cli

    cli(prog_name="acp-green")


if __name__ == "__main__":
    main()
