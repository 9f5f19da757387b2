"""The soak's growth verdict on synthetic series: a warm-up climb that levels is not a leak, steady
growth is, and a run too short to judge is inconclusive (exit 0), never FAILED."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.rig import soak as soak_module
from acp_green.tools.rig.growth import (
    FLAT, GROWING, INCONCLUSIVE, MIN_HALF_SAMPLES, THRESHOLDS, WARMUP, Sample, growth, judge, shortest_judged_run,
)

MIB = 1 << 20
LIMIT = THRESHOLDS["rss"]  # bytes per minute


def series(seconds: float, interval: float, rss_at) -> list[Sample]:
    """Samples every `interval` seconds from the first to `seconds`, RSS given by rss_at(t)."""
    count = int(seconds / interval)
    return [Sample(t, int(rss_at(t)), 7, None) for t in (interval * (i + 1) for i in range(count))]


def warm_up_then_flat(t: float) -> float:
    """What a fresh acp-green serve does: 80 MiB climbing by about 6 MiB over its first minute, then level."""
    return 80 * MIB + 6 * MIB * (1 - math.exp(-t / 15))


def test_a_warm_up_climb_that_levels_is_not_a_leak():
    samples = series(300, 1.0, warm_up_then_flat)
    verdict = judge(samples, "rss", 300.0)
    assert verdict.outcome == FLAT, verdict
    assert abs(verdict.slope_per_min) < 0.1 * MIB


def test_a_run_inside_the_warm_up_is_inconclusive_not_failed():
    """The 45 s soak that reported "growing resources: rss": its second half is all climb."""
    samples = series(45, 1.0, warm_up_then_flat)
    assert growth(samples, "rss", 45.0) > LIMIT  # what the second half alone would have called a leak
    verdict = judge(samples, "rss", 45.0)
    assert verdict.outcome == INCONCLUSIVE, verdict
    assert verdict.reason == "run longer than 120 s (growth is judged on the second half of a run, after a 60 s warm-up)"
    assert verdict.slope_per_min == growth(samples, "rss", 45.0)  # still shown, marked not judged


def test_steady_growth_is_a_leak():
    samples = series(150, 1.0, lambda t: 80 * MIB + 3 * MIB * t / 60)  # 3 MiB a minute, from the start
    verdict = judge(samples, "rss", 150.0)
    assert verdict.outcome == GROWING, verdict
    assert verdict.slope_per_min == pytest.approx(3 * MIB, rel=0.02)


def test_the_shortest_judged_run_is_twice_the_warm_up():
    samples = series(200, 0.5, lambda t: 80 * MIB + 3 * MIB * t / 60)
    assert shortest_judged_run(WARMUP) == 120.0
    assert judge(samples, "rss", 119.9).outcome == INCONCLUSIVE
    assert judge(samples, "rss", 120.0).outcome == GROWING
    assert judge(samples, "rss", 9.9, warmup=5).outcome == INCONCLUSIVE
    assert judge(samples, "rss", 10.0, warmup=5).outcome == GROWING


def test_too_few_samples_in_the_judged_half_is_inconclusive():
    samples = series(130, 4.0, lambda t: 80 * MIB + 30 * MIB * t / 60)  # 16 samples in the second half
    verdict = judge(samples, "rss", 130.0)
    assert verdict.outcome == INCONCLUSIVE, verdict
    assert verdict.reason == f"not enough samples (16 in the second half, {MIN_HALF_SAMPLES} needed)"


def test_an_inconclusive_run_exits_0_and_says_why(monkeypatch, capsys, tmp_path):
    """Nothing was found wrong: exit 0, the summary's first lines say INCONCLUSIVE and the reason."""
    reason = "run longer than 120 s (growth is judged on the second half of a run, after a 60 s warm-up)"
    summary = {"verdict": "inconclusive", "ok": True, "agents": 1, "duration_s": 45.0, "seed": 1, "prompts": 9,
               "side_runs": 0, "criterion": "c", "inconclusive_reasons": [reason], "failed_invariants": [],
               "growing_resources": [], "failures": [],
               "per_agent": [{"slot": 0, "prompts": 9, "violations": 0, "slopes_per_min": {"rss": 2.4 * MIB, "fds": 0.0},
                              "inconclusive": {"rss": reason, "fds": reason}}]}
    monkeypatch.setattr(soak_module, "run_soak", lambda cfg, report, progress: summary)
    code = soak_module.main(soak_module.SoakConfig(["agent"], duration=45, out_dir=str(tmp_path)))
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[:2] == ["soak INCONCLUSIVE: 1 agents, 45s, seed 1", f"  inconclusive: {reason}"]
    assert "  agent 0: 9 prompts, 0 violations; rss +2.40 MiB/min (not judged), fds +0.00/min (not judged)" in out
    assert not any("FAILED" in line for line in out)


# -- random series --------------------------------------------------------------------------
# Noise is bounded (256 KiB either way around the floor) and samples come at most 2 s apart: the
# judged half of a run long enough then holds at least 30 samples (six floors over 60 s or more),
# and noise alone tilts their slope by under 1 MiB/min, even the worst noise: a step from one
# bound to the other in the middle of the judged half. Upward spikes (activity) can be any size:
# a window's minimum ignores them while a window holds a quiet sample (every other one is).
NOISE = 256 * 1024


@st.composite
def noisy_series(draw: st.DrawFn, seconds: float, rss_at) -> list[Sample]:
    interval = draw(st.floats(min_value=0.25, max_value=2.0))
    rnd = draw(st.randoms(use_true_random=False))  # thousands of samples: one draw, not one each
    shape = draw(st.sampled_from(("uniform", "step up", "step down", "bounds")))
    middle = 0.75 * seconds  # of the judged half
    samples = []
    for i in range(int(seconds / interval)):
        t = interval * (i + 1)
        if shape == "uniform":
            noise = rnd.randint(-NOISE, NOISE)
        elif shape == "bounds":
            noise = rnd.choice((-NOISE, NOISE))
        else:
            noise = NOISE if (t >= middle) == (shape == "step up") else -NOISE
        spike = rnd.randint(0, 64 * MIB) if i % 2 else 0
        samples.append(Sample(t, int(rss_at(t)) + noise + spike, 7, None))
    return samples


@st.composite
def warm_up_ramp(draw: st.DrawFn):
    """Any climb within the warm-up: its height, length (up to the window) and curve drawn."""
    height = draw(st.integers(min_value=0, max_value=64 * MIB))
    length = draw(st.floats(min_value=1.0, max_value=WARMUP))
    power = draw(st.floats(min_value=0.2, max_value=5.0))  # concave, linear or convex
    return lambda t: height * min(1.0, t / length) ** power


@settings(deadline=None, max_examples=150)
@given(st.data(), st.floats(min_value=1.0, max_value=600.0), warm_up_ramp())
def test_a_flat_series_with_noise_is_never_failed(data: st.DataObject, seconds: float, ramp) -> None:
    samples = data.draw(noisy_series(seconds, lambda t: 60 * MIB + ramp(t)))
    verdict = judge(samples, "rss", seconds)
    assert verdict.outcome != GROWING, verdict
    if seconds < shortest_judged_run(WARMUP):
        assert verdict.outcome == INCONCLUSIVE


@settings(deadline=None, max_examples=150)
@given(st.data(), st.floats(min_value=shortest_judged_run(WARMUP), max_value=600.0),
       st.floats(min_value=1.5 * LIMIT, max_value=50 * MIB), warm_up_ramp())
def test_steady_growth_above_the_threshold_always_fails_once_the_run_is_long_enough(
        data: st.DataObject, seconds: float, per_minute: float, ramp) -> None:
    samples = data.draw(noisy_series(seconds, lambda t: 60 * MIB + ramp(t) + per_minute * t / 60))
    verdict = judge(samples, "rss", seconds)
    assert verdict.outcome == GROWING, verdict
