"""Soak runs: N agents in parallel for a while under a seeded random mix, invariants checked
continuously, resources sampled, a JSON summary and a memory plot at the end.

Each slot keeps one long-lived agent (sampled for RSS, open descriptors and greenlets) and
drives it with prompts, cancels at random moments, a cancel in the prompt's own write, busy
prompts, mode changes and pauses in reading. EOF mid-turn and SIGTERM end an agent, so the slot
exercises them on short-lived side agents, whose runs are checked the same way.

Growth criterion (stated in the summary too): over the run's second half, samples are grouped
in windows of WINDOW; the least-squares slope through each window's minimum (the floor, which
activity does not lift but a leak does) must stay under the threshold per minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal as signals
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import gevent

from .client import ClientPolicy
from .invariants import Violation
from .plot import PlotUnavailable, pyplot
from .run import CheckedAgent, RunResult

__all__ = ["SoakConfig", "Sample", "run_soak", "plan", "growth", "THRESHOLDS", "WINDOW"]

WINDOW = 5
STDERR_TAIL = 2000  # characters of a failed agent's stderr kept in the summary
STDERR_LINES = 15  # lines of it printed
# Per minute. RSS in bytes. Generous for noise, far below any leak worth the name.
THRESHOLDS = {"rss": 2 * 1024 * 1024, "fds": 2.0, "greenlets": 5.0}

ACTIONS = (
    ("echo", 4), ("stream", 4), ("cancel_wait", 3), ("cancel_stream", 3), ("cancel_same_write", 2),
    ("busy", 1), ("set_mode", 3), ("pause_reading", 2), ("eof_mid_turn", 0.25), ("sigterm", 0.25),
)


@dataclass(slots=True)
class SoakConfig:
    """What to run, how many, how long, and with which seed."""

    command: list[str]
    agents: int = 4
    duration: float = 60.0
    seed: int = 1
    sample_interval: float = 1.0
    sessions: int = 3
    out_dir: str = "soak-results"
    env: dict[str, str] | None = None
    plot: bool = True


@dataclass(slots=True)
class Sample:
    """One resource reading of one agent."""

    t: float
    rss: int | None
    fds: int | None
    greenlets: int | None


@dataclass
class Slot:
    """One parallel lane: its random plan, its main agent, its samples and counters."""

    index: int
    rng: random.Random
    agent: CheckedAgent | None = None
    side: CheckedAgent | None = None  # the short-lived agent of a side run, while it runs
    error: Exception | None = None  # what ended the slot early (reported with its agent's exit and stderr)
    samples: list[Sample] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    side_runs: int = 0
    prompts: int = 0
    stats_supported: bool = True
    plan: list[str] = field(default_factory=list)


def plan(seed: int, slot: int, length: int) -> list[str]:
    """The first `length` actions of a slot: a pure function of (seed, slot)."""
    rng = random.Random(f"{seed}:{slot}")
    names = [name for name, _ in ACTIONS]
    weights = [weight for _, weight in ACTIONS]
    return rng.choices(names, weights, k=length)


def growth(samples: Sequence[Sample], key: str, duration: float) -> float | None:
    """Slope per minute of the windowed floor of one resource over the second half; None if unknown."""
    half = [s for s in samples if s.t >= duration / 2 and getattr(s, key) is not None]  # t counts from the run's start
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


# -- driving one slot ------------------------------------------------------------------------
def _launch(cfg: SoakConfig, slot: Slot, side: bool = False) -> tuple[CheckedAgent, list[str], list[str]]:
    """Start an agent (the slot's main one, or a side run's) and open its sessions.

    The slot holds the agent before the first request, so a failed start still has an exit
    status and a stderr to show."""
    agent = CheckedAgent(cfg.command, ClientPolicy(), env=cfg.env)
    if side:
        slot.side = agent
    else:
        slot.agent = agent
    _call(agent, "initialize", agent.initialize_params())
    sessions, modes = [], []
    for _ in range(cfg.sessions):
        result = _call(agent, "session/new", {"cwd": "/tmp", "mcpServers": []})
        sessions.append(result["sessionId"])
        modes = [m["id"] for m in (result.get("modes") or {}).get("availableModes") or []]
    return agent, sessions, modes


class AgentGone(Exception):
    """The agent closed its stdout (exited) before answering a request the soak needs."""


def _call(agent: CheckedAgent, method: str, params: dict[str, Any], timeout: float = 30.0) -> Any:
    """A request's result; AgentGone at once if the agent's stdout closes first."""
    pending = agent.request(method, params)
    gevent.wait([pending.waitable, agent.eof], count=1, timeout=timeout)
    if not pending.done:
        if agent.eof.is_set():
            raise AgentGone(f"the agent closed its stdout before answering {method}")
        raise TimeoutError(f"no answer to {method} within {timeout:g}s")
    return pending.result(0)


def _act(slot: Slot, action: str, agent: CheckedAgent, sessions: list[str], modes: list[str], cfg: SoakConfig) -> None:
    """One action of the mix on the slot's main agent (EOF and SIGTERM go to a side agent)."""
    rng = slot.rng
    session = rng.choice(sessions)
    if action == "echo":
        agent.prompt(session, "soak " + "x" * rng.randint(1, 200)).response()
        slot.prompts += 1
    elif action == "stream":
        agent.prompt(session, f"/stream {rng.randint(1, 300)} {rng.choice((16, 64, 512))}").response()
        slot.prompts += 1
    elif action in ("cancel_wait", "cancel_stream"):
        text = "/wait" if action == "cancel_wait" else f"/stream {rng.randint(100, 1000)} 256"
        pending = agent.prompt(session, text)
        if action == "cancel_wait":
            agent.checker.expect_cancelled(pending.id)
        gevent.sleep(rng.random() * 0.05)  # a random moment: before, during or (for a stream) after
        agent.cancel(session)
        pending.response()
        slot.prompts += 1
    elif action == "cancel_same_write":
        message = agent.make_request("session/prompt", agent.prompt_params(session, "/wait"))
        agent.checker.expect_cancelled(message["id"])
        agent.send(message, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
        agent.pending_for(message).response()
        slot.prompts += 1
    elif action == "busy":
        first = agent.prompt(session, "/wait")
        agent.checker.expect_cancelled(first.id)
        agent.prompt(session, "second").response()
        agent.cancel(session)
        first.response()
        slot.prompts += 1
    elif action == "set_mode" and modes:
        agent.call("session/set_mode", {"sessionId": session, "modeId": rng.choice(modes)})
    elif action == "pause_reading":
        pending = agent.prompt(session, f"/stream {rng.randint(200, 1000)} 256")
        gevent.sleep(rng.random() * 0.02)
        agent.pause_reading()
        gevent.sleep(0.05 + rng.random() * 0.25)
        agent.resume_reading()
        pending.response()
        slot.prompts += 1
    elif action in ("eof_mid_turn", "sigterm"):
        _side_run(slot, action, cfg)


def _side_run(slot: Slot, action: str, cfg: SoakConfig) -> None:
    """A short-lived agent ended mid-turn by EOF or SIGTERM; its whole run is checked."""
    rng = slot.rng
    agent, sessions, _ = _launch(cfg, slot, side=True)
    pending = [agent.prompt(s, rng.choice(("/wait", f"/stream {rng.randint(100, 2000)} 128"))) for s in sessions]
    del pending
    gevent.sleep(rng.random() * 0.05)
    if action == "sigterm":
        agent.signal(signals.SIGTERM)
    result = agent.finish()
    slot.side = None
    slot.side_runs += 1
    _take(slot, result)


def _take(slot: Slot, result: RunResult) -> None:
    for violation in result.violations:
        slot.violations.append(violation)


def _sampler(slot: Slot, start: float, interval: float) -> None:
    """Sample the slot's main agent every `interval` seconds until the greenlet is killed.

    RSS and descriptors come from /proc at the tick; the greenlet count comes back from the
    agent later (its answer may wait while the client pauses reading) and fills the sample in.
    """
    waiting: tuple[Any, Sample] | None = None
    while True:
        agent = slot.agent
        tick = time.monotonic()
        if agent is not None and not agent.exited:
            sample = Sample(tick - start, agent.memory_rss(), agent.open_fds(), None)
            slot.samples.append(sample)
            if waiting is not None and waiting[0].done:
                answer = waiting[0].response(0)
                if "error" in answer:
                    slot.stats_supported = False  # not an acp_green agent: no greenlet count
                elif isinstance(answer.get("result"), dict):
                    waiting[1].greenlets = answer["result"].get("greenlets")
                waiting = None
            if waiting is None and slot.stats_supported:
                waiting = (agent.request("_acp_green/stats", {}), sample)
        gevent.sleep(max(0.0, interval - (time.monotonic() - tick)))


def _drive(slot: Slot, cfg: SoakConfig, deadline: float, report: Callable[[str], None]) -> None:
    """Run the slot's mix until the deadline; an exception ends the slot and is kept in slot.error."""
    try:
        _drive_until(slot, cfg, deadline, report)
    except Exception as exc:  # a crashed agent, a broken pipe, an answer that makes no sense...
        slot.error = exc


def _drive_until(slot: Slot, cfg: SoakConfig, deadline: float, report: Callable[[str], None]) -> None:
    agent, sessions, modes = _launch(cfg, slot)
    step = 0
    while time.monotonic() < deadline and not agent.exited:
        if step >= len(slot.plan):
            slot.plan.extend(plan(cfg.seed, slot.index, len(slot.plan) + 256)[len(slot.plan):])
        action = slot.plan[step]
        step += 1
        slot.counts[action] = slot.counts.get(action, 0) + 1
        try:
            with gevent.Timeout(30):
                _act(slot, action, agent, sessions, modes, cfg)
        except gevent.Timeout:
            report(f"slot {slot.index}: {action} got no answer within 30s")
            slot.violations.append(Violation("one_response_per_request", f"{action}: no answer within 30s"))
            break
        for violation in agent.check():
            report(f"slot {slot.index}: {violation}")
    slot.plan = slot.plan[:step]


# -- the run ---------------------------------------------------------------------------------
def run_soak(cfg: SoakConfig, report: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Run the soak; returns the summary (also written to out_dir/summary.json)."""
    start = time.monotonic()
    deadline = start + cfg.duration
    slots = [Slot(i, random.Random(f"{cfg.seed}:{i}:moments")) for i in range(cfg.agents)]
    for slot in slots:
        slot.plan = plan(cfg.seed, slot.index, 256)
    drivers = [gevent.spawn(_drive, slot, cfg, deadline, report) for slot in slots]
    samplers = [gevent.spawn(_sampler, slot, start, cfg.sample_interval) for slot in slots]
    while not all(d.dead for d in drivers):
        gevent.joinall(drivers, timeout=5, count=len(drivers))
        now = time.monotonic()
        if not all(d.dead for d in drivers):
            rss = [s.samples[-1].rss for s in slots if s.samples and s.samples[-1].rss]
            report(f"[{now - start:5.1f}s/{cfg.duration:g}s] prompts {sum(s.prompts for s in slots)}, "
                   f"side runs {sum(s.side_runs for s in slots)}, violations {sum(len(s.violations) for s in slots)}, "
                   f"rss {'/'.join(f'{r / 2**20:.1f}' for r in rss)} MiB")
    gevent.killall(samplers, block=True, timeout=5)
    failures: list[dict[str, Any]] = []
    per_agent = []
    for slot in slots:
        failed = slot.error is not None
        for which, agent in (("side agent", slot.side), ("agent", slot.agent)):
            if agent is None:
                continue
            result = agent.finish()
            _take(slot, result)
            if failed:
                failures.append({"kind": "error", "slot": slot.index, "detail": repr(slot.error), "agent": which,
                                 "exit_status": result.exit_code, "stderr_tail": result.stderr_tail[-STDERR_TAIL:]})
                report(_slot_failure(slot.index, which, slot.error, result))
                failed = False  # the exception belongs to the agent the slot was driving: the side run, if any
        if failed:
            failures.append({"kind": "error", "slot": slot.index, "detail": repr(slot.error)})
            report(f"slot {slot.index} failed before any agent started: {slot.error!r}")
        slot.side = None
        slopes = {key: growth(slot.samples, key, cfg.duration) for key in THRESHOLDS}
        for key, slope in slopes.items():
            if slope is not None and slope > THRESHOLDS[key]:
                failures.append({"kind": "growth", "slot": slot.index, "resource": key, "slope_per_min": slope,
                                 "threshold_per_min": THRESHOLDS[key]})
        for violation in slot.violations:
            failures.append({"kind": "invariant", "slot": slot.index, **violation.to_json()})
        per_agent.append({
            "slot": slot.index,
            "prompts": slot.prompts,
            "side_runs": slot.side_runs,
            "actions": slot.counts,
            "plan_sha256": hashlib.sha256(",".join(slot.plan).encode()).hexdigest()[:16],
            "slopes_per_min": slopes,
            "first_sample": asdict(slot.samples[0]) if slot.samples else None,
            "last_sample": asdict(slot.samples[-1]) if slot.samples else None,
            "violations": len(slot.violations),
        })
    summary = {
        "ok": not failures,
        "command": cfg.command,
        "agents": cfg.agents,
        "duration_s": cfg.duration,
        "elapsed_s": round(time.monotonic() - start, 2),
        "seed": cfg.seed,
        "prompts": sum(s.prompts for s in slots),
        "side_runs": sum(s.side_runs for s in slots),
        "criterion": (f"least-squares slope, per minute, through the minimum of each window of {WINDOW} samples "
                      f"over the run's second half; fail above {THRESHOLDS}"),
        "per_agent": per_agent,
        "failures": failures[:100],
        "failed_invariants": sorted({f["invariant"] for f in failures if f["kind"] == "invariant"}),
        "growing_resources": sorted({f["resource"] for f in failures if f["kind"] == "growth"}),
    }
    os.makedirs(cfg.out_dir, exist_ok=True)
    with open(os.path.join(cfg.out_dir, "summary.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2)
    with open(os.path.join(cfg.out_dir, "samples.json"), "w", encoding="utf-8") as handle:
        json.dump({str(s.index): [asdict(x) for x in s.samples] for s in slots}, handle)
    if cfg.plot:
        summary["plot"] = _plot(slots, cfg.out_dir, report)
    return summary


def _slot_failure(index: int, which: str, error: BaseException, result: RunResult) -> str:
    """What a failed slot prints: the error, then its agent's exit status and last stderr lines."""
    status = result.exit_code
    how = ("still running (killed by the soak)" if result.killed else "no exit status" if status is None
           else f"killed by signal {-status}" if status < 0 else f"exit status {status}")
    tail = result.stderr_tail.rstrip().splitlines()[-STDERR_LINES:]
    lines = [f"slot {index} failed: {error!r}", f"  its {which} (pid {result.pid}): {how}"]
    lines += [f"  stderr: {line}" for line in tail] or ["  stderr: (empty)"]
    return "\n".join(lines)


def _plot(slots: Sequence[Slot], out_dir: str, report: Callable[[str], None]) -> str | None:
    """memory.png: RSS of every agent over time; skipped (with a note) without matplotlib."""
    try:
        plt = pyplot()
    except PlotUnavailable as exc:
        report(f"no plot: {exc}")
        return None
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for slot in slots:
        points = [(s.t, s.rss / 2**20) for s in slot.samples if s.rss is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], label=f"agent {slot.index}")
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("Agent memory during the soak")
    ax.legend(loc="upper left", fontsize="small")
    ax.grid(True, alpha=0.3)
    path = os.path.join(out_dir, "memory.png")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def format_summary(summary: dict[str, Any]) -> str:
    """The human summary printed at the end."""
    lines = [
        f"soak {'PASSED' if summary['ok'] else 'FAILED'}: {summary['agents']} agents, {summary['duration_s']:g}s, seed {summary['seed']}",
        f"  prompts {summary['prompts']}, side runs (EOF mid-turn / SIGTERM) {summary['side_runs']}",
        f"  criterion: {summary['criterion']}",
    ]
    for agent in summary["per_agent"]:
        slopes = ", ".join(
            f"{k} {'n/a' if v is None else (f'{v / 2**20:+.2f} MiB/min' if k == 'rss' else f'{v:+.2f}/min')}"
            for k, v in agent["slopes_per_min"].items())
        lines.append(f"  agent {agent['slot']}: {agent['prompts']} prompts, {agent['violations']} violations; {slopes}")
    if summary["failed_invariants"]:
        lines.append(f"  broken invariants: {', '.join(summary['failed_invariants'])}")
    if summary["growing_resources"]:
        lines.append(f"  growing resources: {', '.join(summary['growing_resources'])}")
    for failure in summary["failures"][:5]:
        lines.append(f"  - {json.dumps(failure)[:400]}")
    if summary.get("plot"):
        lines.append(f"  plot: {summary['plot']}")
    return "\n".join(lines)


def fresh_state_command(out_dir: str) -> list[str]:
    """`acp-green serve` on an emptied state directory, out_dir/state: the default soaked agent
    (a state directory, not --ephemeral, so the store's thread and database are soaked too)."""
    state = os.path.join(out_dir, "state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    return [sys.executable, "-m", "acp_green", "serve", "--state-dir", state]


def main(cfg: SoakConfig) -> int:
    """The `acp-green soak` command: progress on stderr, the summary on stdout; 1 on failure."""
    import click

    click.echo(f"soak: {cfg.agents} x {' '.join(cfg.command)} for {cfg.duration:g}s, seed {cfg.seed}", err=True)
    summary = run_soak(cfg, lambda line: click.echo(line, err=True))
    click.echo(format_summary(summary))
    click.echo(f"  summary: {os.path.join(cfg.out_dir, 'summary.json')}")
    return 0 if summary["ok"] else 1
