"""The soak's growth criterion rests on sample counts: a slot short of samples runs on, a run
still too short for a slope says "not enough samples" (inconclusive), and progress shows while it runs."""

from __future__ import annotations

import re
import sys

from acp_green.tools.rig.soak import MIN_HALF_SAMPLES, SoakConfig, format_summary, progress_line, run_soak, second_half, Sample

SERVE = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]


def test_a_run_too_short_for_a_slope_says_not_enough_samples(tmp_path):
    """One sample a second over a run capped at 3x half a second (long enough for its tiny
    warm-up): no slope can be computed, and the run is inconclusive, saying why, instead of
    passing the growth criterion silently."""
    progress: list[str] = []
    summary = run_soak(SoakConfig(SERVE, agents=1, duration=0.5, sample_interval=1.0, out_dir=str(tmp_path), plot=False,
                                  warmup=0.1),
                       progress=progress.append, progress_every=0.2)
    [agent] = summary["per_agent"]
    assert agent["slopes_per_min"]["rss"] is None and agent["slopes_per_min"]["fds"] is None
    assert set(agent["inconclusive"]) >= {"rss", "fds"}, agent
    assert summary["growth_judged"] is False and summary["verdict"] == "inconclusive" and summary["ok"]
    text = format_summary(summary)
    assert text.splitlines()[0].startswith("soak INCONCLUSIVE: 1 agents, 0.5s")
    assert re.search(r"inconclusive: agent 0 rss: not enough samples \(\d+ in the second half, 20 needed\)", text), text
    assert progress and all(re.match(r"\[\s*[\d.]+s/0.5s\] actions \d+, prompts \d+, side runs \d+, violations 0, ", line)
                            for line in progress), progress


def test_a_slot_short_of_samples_runs_on_until_its_second_half_holds_enough(tmp_path):
    """Ten samples a second for two seconds leave ten in the second half: the slot runs on (up to
    3x the duration) until the second half holds MIN_HALF_SAMPLES, however slowly the machine samples."""
    summary = run_soak(SoakConfig(SERVE, agents=1, duration=2, sample_interval=0.1, out_dir=str(tmp_path), plot=False,
                                  warmup=1))
    [agent] = summary["per_agent"]
    assert agent["elapsed_s"] > 2
    assert set(agent["inconclusive"]) <= {"greenlets"}, agent  # counts come back through the agent, fewer
    assert agent["slopes_per_min"]["rss"] is not None and agent["slopes_per_min"]["fds"] is not None
    samples = [Sample(**s) for s in __import__("json").loads((tmp_path / "samples.json").read_text())["0"]]
    # elapsed_s is rounded to 10 ms: the half the soak judged started up to 2.5 ms before half of it
    # (with the rounded figure, a sample in those 2.5 ms was missed now and then: 19 of 20 counted).
    assert len(second_half(samples, "rss", agent["elapsed_s"] - 0.005)) >= MIN_HALF_SAMPLES


def test_a_run_too_short_to_be_judged_does_not_run_on_for_samples(tmp_path):
    """Inside the warm-up no number of samples makes growth judgeable: the slot stops at the
    duration instead of running on (up to 3x) for samples that cannot help."""
    summary = run_soak(SoakConfig(SERVE, agents=1, duration=2, sample_interval=1.0, out_dir=str(tmp_path), plot=False,
                                  warmup=5))
    [agent] = summary["per_agent"]
    assert agent["elapsed_s"] < 4.5, agent  # running on, it would stop at 6 s (one sample a second: never 20 in 1-3 s)
    assert summary["verdict"] == "inconclusive", summary
    assert summary["inconclusive_reasons"] == [
        "run longer than 10 s (growth is judged on the second half of a run, after a 5 s warm-up)"]


def test_progress_says_running_on_only_for_a_run_that_runs_on():
    """Past the duration, a run long enough to be judged is running on for samples; a shorter one
    is only finishing its last action."""
    assert progress_line([], 3.0, 2.0).endswith("MiB  (running on: too few samples yet)")
    assert progress_line([], 3.0, 2.0, runs_on=False).endswith("rss - MiB")
