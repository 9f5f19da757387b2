"""Console entry point (`acp-green`, `python -m acp_green`): hands argv to the click command line.

Nothing is decided here from raw argv: `serve --monkey-patch` patches in the `serve` command
itself, once click has parsed the command line (see `cli.serve`).
"""

from __future__ import annotations


def main() -> None:
    """Run the `acp-green` command line."""
    from .cli import cli

    cli(prog_name="acp-green")


if __name__ == "__main__":
    main()
