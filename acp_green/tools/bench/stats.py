"""Small statistics: percentiles, medians and spread of repeated runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: int) -> float:
    """The q-th percentile (q from 1 to 99), interpolated between the closest ranks (the
    standard library's "inclusive" quantiles); NaN for no values."""
    if not 1 <= q <= 99:
        raise ValueError(f"a percentile from 1 to 99, not {q!r}")
    if not values:
        return math.nan
    if len(values) == 1:  # statistics.quantiles wants two points (until Python 3.13)
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


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
    return Summary(float(statistics.median(finite)), min(finite), max(finite), list(runs))
