"""Small statistics: percentiles, medians and spread of repeated runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(slots=True)
class Summary:
    """Median and spread of one metric over repeated runs."""

    median: float
    low: float
    high: float
    runs: list[float]

    @property
    def spread(self) -> float:
        """(max - min) / median: how far the runs disagree, as a fraction of the median."""
        return (self.high - self.low) / self.median if self.median else math.nan

    def as_dict(self) -> dict[str, object]:
        return {"median": self.median, "min": self.low, "max": self.high, "spread": self.spread, "runs": self.runs}


def summarize(runs: Sequence[float]) -> Summary:
    """Median, min and max of the finite values among `runs`."""
    finite = [v for v in runs if isinstance(v, (int, float)) and math.isfinite(v)]
    if not finite:
        return Summary(math.nan, math.nan, math.nan, list(runs))
    return Summary(percentile(finite, 50), min(finite), max(finite), list(runs))
