"""The soak's growth criterion rests on sample counts: a slot short of samples runs on, a run
still too short for a slope says "not enough samples", and progress shows while it runs."""

from __future__ import annotations

import re
import sys

from acp_green.tools.rig.soak import MIN_HALF_SAMPLES, SoakConfig, format_summary, run_soak, second_half, Sample

SERVE = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]


def test_a_run_too_short_for_a_slope_says_not_enough_samples(tmp_path):
    """One sample a second over a run capped at 3x half a second: no slope can be computed, and
    the summary says so instead of passing the growth criterion silently."""
    progress: list[str] = []
    summary = run_soak(SoakConfig(SERVE, agents=1, duration=0.5, sample_interval=1.0, out_dir=str(tmp_path), plot=False),
                       progress=progress.append, progress_every=0.2)
    [agent] = summary["per_agent"]
    assert agent["slopes_per_min"]["rss"] is None and agent["slopes_per_min"]["fds"] is None
    assert set(agent["not_enough_samples"]) >= {"rss", "fds"}, agent
    assert summary["growth_judged"] is False
    text = format_summary(summary)
    assert "not judged" in text.splitlines()[0]
    assert re.search(r"rss: not enough samples \(\d+ in the second half, 10 needed for a slope\)", text), text
    assert progress and all(re.match(r"\[\s*[\d.]+s/0.5s\] actions \d+, prompts \d+, side runs \d+, violations 0, ", line)
                            for line in progress), progress


def test_a_slot_short_of_samples_runs_on_until_its_second_half_holds_enough(tmp_path):
    """Ten samples a second for two seconds leave ten in the second half: the slot runs on (up to
    3x the duration) until the second half holds MIN_HALF_SAMPLES, however slowly the machine samples."""
    summary = run_soak(SoakConfig(SERVE, agents=1, duration=2, sample_interval=0.1, out_dir=str(tmp_path), plot=False))
    [agent] = summary["per_agent"]
    assert agent["elapsed_s"] > 2
    assert set(agent["not_enough_samples"]) <= {"greenlets"}, agent  # counts come back through the agent, fewer
    assert agent["slopes_per_min"]["rss"] is not None and agent["slopes_per_min"]["fds"] is not None
    samples = [Sample(**s) for s in __import__("json").loads((tmp_path / "samples.json").read_text())["0"]]
    assert len(second_half(samples, "rss", agent["elapsed_s"])) >= MIN_HALF_SAMPLES
