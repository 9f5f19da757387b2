"""Logging to stderr that can never take the process down.

During `acp-green serve`, sys.stderr is a sink that never blocks (stderrsink.py); configure
after installing it. Elsewhere stderr may share a non-blocking file description with the wire
(a client that ran the agent with `2>&1`): a line that cannot be written
is dropped, not raised.
"""

from __future__ import annotations

import logging
import sys


class StderrHandler(logging.StreamHandler):
    """A StreamHandler on the current sys.stderr that drops a record rather than raise."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        pass  # BlockingIOError or a closed stderr: losing a log line beats losing the process


def configure(level: str = "WARNING") -> None:
    """Send every log record at `level` and above to stderr."""
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("acp-green %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
