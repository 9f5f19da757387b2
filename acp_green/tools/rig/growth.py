"""The soak's growth criterion: whether a resource sampled over a run keeps growing, judged only
after the agent's warm-up.

A fresh agent's memory climbs for a while and then levels: SQLite's page cache fills, strings
are interned, the allocator's arenas and the runtime's pools reach their working size. Read over
that climb, a slope says "leak" when there is none. So growth is judged on the second half of a
run, and only of a run at least twice the warm-up window long: the judged half then starts after
the warm-up, and spans at least a warm-up's length, enough for a floor to show its trend.
Why the second half and not simply everything after the window: warm-up is a quantity of work
(prompts, pages written), not of seconds, and a loaded machine does that work more slowly; a
long run judges only its later half and so keeps a margin that grows with the run.

Within the judged half, samples are grouped in windows of WINDOW; the least-squares slope through
each window's minimum (the floor, which activity does not lift but a leak does) must stay under
the resource's threshold per minute. A run shorter than twice the warm-up, or whose judged half
holds fewer than MIN_HALF_SAMPLES samples, is inconclusive: said so, with the reason, and never
counted as a pass or a failure.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Sample", "Judgement", "WINDOW", "MIN_HALF_SAMPLES", "THRESHOLDS", "WARMUP", "second_half", "growth",
           "judge", "shortest_judged_run", "too_short_reason"]

WINDOW = 5
MIN_HALF_SAMPLES = 4 * WINDOW  # samples the judged half needs: four floors to fit a slope through
WARMUP = 60.0  # seconds: a fresh acp-green serve's RSS climbs for about a minute, then levels
# Per minute. RSS in bytes. Generous for noise, far below any leak worth the name.
THRESHOLDS = {"rss": 2 * 1024 * 1024, "fds": 2.0, "greenlets": 5.0}

FLAT, GROWING, INCONCLUSIVE = "flat", "growing", "inconclusive"


@dataclass(slots=True)
class Sample:
    """One resource reading of one agent."""

    t: float
    rss: int | None
    fds: int | None
    greenlets: int | None


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on one resource: flat, growing, or inconclusive (with the reason)."""

    resource: str
    outcome: str
    slope_per_min: float | None  # over the second half, judged or not (None: too few samples for any slope)
    reason: str = ""  # why it is inconclusive


def second_half(samples: Sequence[Sample], key: str, duration: float) -> list[Sample]:
    """The samples of one resource taken in the second half of a run of `duration` seconds."""
    return [s for s in samples if s.t >= duration / 2 and getattr(s, key) is not None]  # t counts from the run's start


def growth(samples: Sequence[Sample], key: str, duration: float) -> float | None:
    """Slope per minute of the windowed floor of one resource over the second half; None if unknown."""
    half = second_half(samples, key, duration)
    if len(half) < 2 * WINDOW:
        return None
    points = []
    for i in range(0, len(half) - WINDOW + 1, WINDOW):
        window = half[i : i + WINDOW]
        low = min(window, key=lambda s: getattr(s, key))
        points.append((low.t, float(getattr(low, key))))
    if len(points) < 2:
        return None
    try:
        return 60.0 * statistics.linear_regression([p[0] for p in points], [p[1] for p in points]).slope
    except statistics.StatisticsError:  # every floor at one instant: no slope
        return None


def shortest_judged_run(warmup: float) -> float:
    """Seconds a run needs before its growth is judged: its second half must start after the warm-up."""
    return 2 * warmup


def too_short_reason(warmup: float) -> str:
    """What an inconclusive run too short to judge says."""
    return (f"run longer than {shortest_judged_run(warmup):g} s (growth is judged on the second half of a run, "
            f"after a {warmup:g} s warm-up)")


def judge(samples: Sequence[Sample], key: str, elapsed: float, warmup: float = WARMUP,
          threshold: float | None = None) -> Judgement:
    """Whether one resource grew over the judged half of a run `elapsed` seconds long."""
    limit = THRESHOLDS[key] if threshold is None else threshold
    slope = growth(samples, key, elapsed)
    if elapsed < shortest_judged_run(warmup):
        return Judgement(key, INCONCLUSIVE, slope, too_short_reason(warmup))
    held = len(second_half(samples, key, elapsed))
    if slope is None or held < MIN_HALF_SAMPLES:
        return Judgement(key, INCONCLUSIVE, slope,
                         f"not enough samples ({held} in the second half, {MIN_HALF_SAMPLES} needed)")
    return Judgement(key, GROWING if slope > limit else FLAT, slope)
