"""matplotlib, the optional extra that the soak's memory plot and the bench chart draw with."""

from __future__ import annotations

from typing import Any

#: The one thing said when a plot cannot be drawn; `plot` is the one extra that brings matplotlib.
MISSING = "matplotlib is not installed: pip install 'acp-green[plot]' (scripts/soak.sh and scripts/bench.sh install it)"


class PlotUnavailable(Exception):
    """matplotlib is not installed; the message says how to install it."""


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (files only, no display); PlotUnavailable without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(MISSING) from None
    return plt
