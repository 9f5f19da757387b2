"""Soak runs: N agents in parallel for a while under a seeded random mix, invariants checked
continuously, resources sampled, a JSON summary and a memory plot at the end.

Each slot keeps one long-lived agent (sampled for RSS, open descriptors and greenlets) and
drives it with prompts, cancels at random moments, a cancel in the prompt's own write, busy
prompts, mode changes and pauses in reading. EOF mid-turn and SIGTERM end an agent, so the slot
exercises them on short-lived side agents, whose runs are checked the same way.

Growth is judged only after the agent's warm-up (growth.py says how and why): on the second half
of each slot's run, and only of a run at least twice --warmup long; a shorter run is
"inconclusive: run longer than N s" (exit 0), never a pass or a failure. The criterion rests on
sample counts too, not on the clock: a slot of a run long enough keeps running past the duration
until its second half holds MIN_HALF_SAMPLES samples (a loaded machine samples less often), up to
EXTENSION times the duration; one still short of them is inconclusive ("not enough samples").

The default agent, `acp-green serve`, gets a state directory of its own in every slot (and one
for each slot's side runs), so one slot's sessions never show in another's session/list.

The soak holds an agent to the rules the probe holds it to (probe_rules.py), no stricter: ACP's
rule on updates after a turn (session-level ones, a title say, may follow a response: acp_green's
own S5 is not asked of other agents); the demo's `/wait` held to answering `cancelled` only once
the slot saw it run until cancelled, as the probe's long prompt (another agent may answer it at
once); a second prompt on a busy session refused at once, held or run alongside (ACP defines no
refusal), never waited on for ever; nothing owed for what still runs when stdin closes. What an
agent leaves running after it exits is judged after the probe's settle window (settled.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal as signals
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import gevent

from .client import ClientPolicy, Pending
from .growth import (GROWING, INCONCLUSIVE, MIN_HALF_SAMPLES, THRESHOLDS, WARMUP, WINDOW, Judgement, Sample, growth, judge,
                     second_half, shortest_judged_run, too_short_reason)
from .invariants import Violation
from .plot import PlotUnavailable, pyplot
from .run import CheckedAgent, RunResult
from .settled import SettledAgent

__all__ = ["SoakConfig", "Sample", "run_soak", "plan", "growth", "second_half", "judge", "THRESHOLDS", "WINDOW",
           "MIN_HALF_SAMPLES", "WARMUP"]

EXTENSION = 3.0  # a slot short of samples runs on, up to this many times the duration
LONG_PROMPT = "/wait"  # the demo's prompt that runs until cancelled (another agent may answer it at once)
SETTLE = 0.5  # how long the long prompt must still run for the slot to take it as one that waits (the probe's settle)
BUSY_WAIT = 2.0  # how long a second prompt on a busy session may go unanswered before the first is cancelled
STDERR_TAIL = 2000  # characters of a failed agent's stderr kept in the summary
STDERR_LINES = 15  # lines of it printed

ACTIONS = (
    ("echo", 4), ("stream", 4), ("cancel_wait", 3), ("cancel_stream", 3), ("cancel_same_write", 2),
    ("busy", 1), ("set_mode", 3), ("pause_reading", 2), ("eof_mid_turn", 0.25), ("sigterm", 0.25),
)


@dataclass(slots=True)
class SoakConfig:
    """What to run, how many, how long, and with which seed."""

    command: list[str]
    agents: int = 4
    duration: float = 120.0
    seed: int = 1
    sample_interval: float = 1.0
    sessions: int = 3
    out_dir: str = "soak-results"
    env: dict[str, str] | None = None
    plot: bool = True
    warmup: float = WARMUP  # seconds of warm-up: growth is judged on runs at least twice as long
    state_root: str | None = None  # set: each slot's agents get `--state-dir` under it (agent_command)

    def agent_command(self, slot: int, side: bool = False) -> list[str]:
        """The command a slot's main agent (or its side runs' agents) runs.

        With a state root, each gets a state directory of its own, state_root/slot-N (side runs:
        slot-N-side, one at a time): one process serves from a state directory, and a second one
        refused the lock would keep its state in memory, its store unsoaked."""
        if self.state_root is None:
            return self.command
        name = f"slot-{slot}-side" if side else f"slot-{slot}"
        return [*self.command, "--state-dir", os.path.join(self.state_root, name)]

    def judges_growth(self) -> bool:
        """Whether a run of this duration is long enough for its growth to be judged."""
        return self.duration >= shortest_judged_run(self.warmup)


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
    elapsed: float = 0.0  # seconds from the run's start to the slot's last action
    waits: bool = False  # the agent's LONG_PROMPT runs until cancelled: only then must a cancelled one answer `cancelled`

    @property
    def actions(self) -> int:
        return sum(self.counts.values())

    def violation_count(self) -> int:
        """Violations so far: those taken from finished runs plus the main agent's running tally."""
        running = len(self.agent.checker.violations) if self.agent is not None else 0
        return len(self.violations) + running


def plan(seed: int, slot: int, length: int) -> list[str]:
    """The first `length` actions of a slot: a pure function of (seed, slot)."""
    rng = random.Random(f"{seed}:{slot}")
    names = [name for name, _ in ACTIONS]
    weights = [weight for _, weight in ACTIONS]
    return rng.choices(names, weights, k=length)


# -- driving one slot ------------------------------------------------------------------------
def _launch(cfg: SoakConfig, slot: Slot, side: bool = False) -> tuple[CheckedAgent, list[str], list[str]]:
    """Start an agent (the slot's main one, or a side run's) and open its sessions.

    The slot holds the agent before the first request, so a failed start still has an exit
    status and a stderr to show."""
    agent = SettledAgent(cfg.agent_command(slot.index, side), ClientPolicy(), env=cfg.env)
    agent.checker.session_updates_between_turns = True  # ACP's rule, as the probe's; not acp_green's stricter S5
    agent.checker.leaves_ids = True  # an id fault is the id rules', counted once (as in the probe)
    if side:
        agent.owed_at_end = False  # ACP owes nothing for what still runs when stdin closes (the probe's advisory)
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


def _runs_until_cancelled(agent: CheckedAgent, session: str) -> bool:
    """Whether LONG_PROMPT runs until cancelled on this agent, read as the probe reads its long
    prompt: still running SETTLE seconds after it was sent (then cancelled, and held to answering
    `cancelled`). Another agent answers it some other way, at once: no cancel of it is held to that."""
    pending = agent.prompt(session, LONG_PROMPT)
    gevent.wait([pending.waitable, agent.eof], count=1, timeout=SETTLE)
    waits = not pending.done
    if waits:
        agent.checker.expect_cancelled(pending.id)
        agent.cancel(session)
    pending.response()
    return waits


def _long_prompt(slot: Slot, agent: CheckedAgent, session: str) -> Pending:
    """LONG_PROMPT, held to answering `cancelled` once cancelled when the slot saw it run until cancelled."""
    pending = agent.prompt(session, LONG_PROMPT)
    if slot.waits:
        agent.checker.expect_cancelled(pending.id)
    return pending


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
        pending = _long_prompt(slot, agent, session) if action == "cancel_wait" else \
            agent.prompt(session, f"/stream {rng.randint(100, 1000)} 256")
        gevent.sleep(rng.random() * 0.05)  # a random moment: before, during or (for a stream) after
        agent.cancel(session)
        pending.response()
        slot.prompts += 1
    elif action == "cancel_same_write":
        message = agent.make_request("session/prompt", agent.prompt_params(session, LONG_PROMPT))
        if slot.waits:
            agent.checker.expect_cancelled(message["id"])
        agent.send(message, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
        agent.pending_for(message).response()
        slot.prompts += 1
    elif action == "busy":
        first = _long_prompt(slot, agent, session)
        second = agent.prompt(session, "second")
        # Refused at once (acp_green's S8), held until the first ends, or run alongside: ACP defines no refusal.
        gevent.wait([second.waitable, agent.eof], count=1, timeout=BUSY_WAIT)
        agent.cancel(session)
        first.response()
        second.response()
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
    pending = [agent.prompt(s, rng.choice((LONG_PROMPT, f"/stream {rng.randint(100, 2000)} 128"))) for s in sessions]
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


class ProcSampler(threading.Thread):
    """Reads every slot's RSS and descriptors from /proc every `interval` seconds, in a thread
    of its own: the rig's greenlets may keep the hub busy for long stretches (a stream of
    thousands of updates is parsed and checked in one go, more slowly on a loaded machine), and
    a sample must not wait for them. It touches no gevent object: /proc, the slot's agent pid and
    list appends only."""

    def __init__(self, slots: Sequence[Slot], start: float, interval: float) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.slots, self.start_time, self.interval = slots, start, interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            tick = time.monotonic()
            for slot in self.slots:
                agent = slot.agent
                if agent is not None and agent.proc.returncode is None:
                    rss, fds = agent.memory_rss(), agent.open_fds()
                    if rss is not None:
                        slot.samples.append(Sample(tick - self.start_time, rss, fds, None))
            self.stopped.wait(max(0.0, self.interval - (time.monotonic() - tick)))

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


def _greenlet_counter(slot: Slot, interval: float) -> None:
    """Ask the slot's agent for its greenlet count about every `interval` seconds, until killed.

    The answer may wait while the client pauses reading; it fills in the latest /proc sample
    taken when the question was asked."""
    while True:
        agent = slot.agent
        tick = time.monotonic()
        if agent is not None and not agent.exited and slot.samples and slot.stats_supported:
            sample = slot.samples[-1]
            answer = _answer_or_none(agent.request("_acp_green/stats", {}), agent)
            if answer is not None and "error" in answer:
                slot.stats_supported = False  # not an acp_green agent: no greenlet count
            elif answer is not None and isinstance(answer.get("result"), dict):
                sample.greenlets = answer["result"].get("greenlets")
        gevent.sleep(max(0.0, interval - (time.monotonic() - tick)))


def _answer_or_none(pending: Pending, agent: CheckedAgent) -> dict[str, Any] | None:
    """The response, or None if the agent's stdout closed first."""
    gevent.wait([pending.waitable, agent.eof], count=1)
    return pending.response(0) if pending.done else None


def _drive(slot: Slot, cfg: SoakConfig, start: float, report: Callable[[str], None]) -> None:
    """Run the slot's mix (see the module's growth criterion for when it stops); an exception ends
    the slot and is kept in slot.error."""
    try:
        _drive_until(slot, cfg, start, report)
    except Exception as exc:  # a crashed agent, a broken pipe, an answer that makes no sense...
        slot.error = exc


def _sampled_enough(slot: Slot, start: float) -> bool:
    """Whether the slot's second half, were it to stop now, holds enough samples for a slope."""
    return len(second_half(slot.samples, "rss", time.monotonic() - start)) >= MIN_HALF_SAMPLES


def _drive_until(slot: Slot, cfg: SoakConfig, start: float, report: Callable[[str], None]) -> None:
    agent, sessions, modes = _launch(cfg, slot)
    with gevent.Timeout(30):
        slot.waits = _runs_until_cancelled(agent, sessions[0])
    step = 0
    deadline = start + cfg.duration
    # Running on for samples helps only a run long enough to be judged; a shorter one is inconclusive anyway.
    last_call = start + cfg.duration * (EXTENSION if cfg.judges_growth() else 1.0)
    while not agent.exited and (now := time.monotonic()) < last_call and (now < deadline or not _sampled_enough(slot, start)):
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
        slot.elapsed = time.monotonic() - start
    slot.plan = slot.plan[:step]


# -- the run ---------------------------------------------------------------------------------
def progress_line(slots: Sequence[Slot], elapsed: float, duration: float, runs_on: bool = True) -> str:
    """One line of progress: time, actions, prompts, side runs, violations, each agent's RSS.

    `runs_on`: whether slots run past the duration for samples (only runs long enough to be judged do)."""
    rss = [s.samples[-1].rss for s in slots if s.samples and s.samples[-1].rss]
    over = "  (running on: too few samples yet)" if runs_on and elapsed > duration else ""
    return (f"[{elapsed:5.1f}s/{duration:g}s] actions {sum(s.actions for s in slots)}, prompts {sum(s.prompts for s in slots)}, "
            f"side runs {sum(s.side_runs for s in slots)}, violations {sum(s.violation_count() for s in slots)}, "
            f"rss {'/'.join(f'{r / 2**20:.1f}' for r in rss) or '-'} MiB{over}")


def run_soak(cfg: SoakConfig, report: Callable[[str], None] = lambda line: None,
             progress: Callable[[str], None] | None = None, progress_every: float = 1.0) -> dict[str, Any]:
    """Run the soak; returns the summary (also written to out_dir/summary.json).

    `report` gets events (violations, failed slots); `progress`, every `progress_every`
    seconds, the progress line."""
    start = time.monotonic()
    slots = [Slot(i, random.Random(f"{cfg.seed}:{i}:moments")) for i in range(cfg.agents)]
    for slot in slots:
        slot.plan = plan(cfg.seed, slot.index, 256)
    drivers = [gevent.spawn(_drive, slot, cfg, start, report) for slot in slots]
    sampler = ProcSampler(slots, start, cfg.sample_interval)
    sampler.start()
    counters = [gevent.spawn(_greenlet_counter, slot, cfg.sample_interval) for slot in slots]
    while not all(d.dead for d in drivers):
        gevent.joinall(drivers, timeout=progress_every, count=len(drivers))
        if progress is not None:
            progress(progress_line(slots, time.monotonic() - start, cfg.duration, cfg.judges_growth()))
    sampler.stop()
    gevent.killall(counters, block=True, timeout=5)
    failures: list[dict[str, Any]] = []
    per_agent = []
    for slot in slots:
        error = slot.error  # reported once, beside the first agent that finishes
        for which, agent in (("side agent", slot.side), ("agent", slot.agent)):
            if agent is None:
                continue
            result = agent.finish()
            _take(slot, result)
            if error is not None:
                failures.append({"kind": "error", "slot": slot.index, "detail": repr(error), "agent": which,
                                 "exit_status": result.exit_code, "stderr_tail": result.stderr_tail[-STDERR_TAIL:]})
                report(_slot_failure(slot.index, which, error, result))
                error = None  # the exception belongs to the agent the slot was driving: the side run, if any
        if error is not None:
            failures.append({"kind": "error", "slot": slot.index, "detail": repr(error)})
            report(f"slot {slot.index} failed before any agent started: {error!r}")
        slot.side = None
        slopes = {key: growth(slot.samples, key, slot.elapsed) for key in THRESHOLDS}
        judgements = _judge_slot(slot, cfg.warmup)
        for judgement in judgements:
            if judgement.outcome == GROWING:
                failures.append({"kind": "growth", "slot": slot.index, "resource": judgement.resource,
                                 "slope_per_min": judgement.slope_per_min, "threshold_per_min": THRESHOLDS[judgement.resource]})
        for violation in slot.violations:
            failures.append({"kind": "invariant", "slot": slot.index, **violation.to_json()})
        per_agent.append({
            "slot": slot.index,
            "prompts": slot.prompts,
            "side_runs": slot.side_runs,
            "actions": slot.counts,
            "plan_sha256": hashlib.sha256(",".join(slot.plan).encode()).hexdigest()[:16],
            "slopes_per_min": slopes,
            "elapsed_s": round(slot.elapsed, 2),
            "samples": len(slot.samples),
            # Resources whose growth could not be judged, with the reason (too short a run, too few samples).
            "inconclusive": {j.resource: j.reason for j in judgements if j.outcome == INCONCLUSIVE},
            "first_sample": asdict(slot.samples[0]) if slot.samples else None,
            "last_sample": asdict(slot.samples[-1]) if slot.samples else None,
            "violations": len(slot.violations),
        })
    reasons = _inconclusive_reasons(per_agent, cfg.warmup)
    summary: dict[str, Any] = {
        # FAILED: a broken invariant, a failed slot or a resource growing after the warm-up; else
        # INCONCLUSIVE when some growth could not be judged (exit 0 too: nothing was found wrong); else PASSED.
        "verdict": "failed" if failures else "inconclusive" if reasons else "passed",
        "ok": not failures,
        "command": cfg.command,
        "state_root": cfg.state_root,
        "agents": cfg.agents,
        "duration_s": cfg.duration,
        "warmup_s": cfg.warmup,
        "elapsed_s": round(time.monotonic() - start, 2),
        "seed": cfg.seed,
        "prompts": sum(s.prompts for s in slots),
        "side_runs": sum(s.side_runs for s in slots),
        "criterion": (f"least-squares slope, per minute, through the minimum of each window of {WINDOW} samples "
                      f"over the second half of each agent's run, judged only when the run is at least "
                      f"{shortest_judged_run(cfg.warmup):g} s long (twice the {cfg.warmup:g} s warm-up) and that half "
                      f"holds {MIN_HALF_SAMPLES} samples (run on for them up to {EXTENSION:g}x the duration); "
                      f"fail above {THRESHOLDS}"),
        "growth_judged": not reasons,
        "inconclusive_reasons": reasons,
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


def _judge_slot(slot: Slot, warmup: float) -> list[Judgement]:
    """The growth verdict on each resource the slot's agent reports (greenlets: acp_green agents only)."""
    keys = [key for key in THRESHOLDS if key != "greenlets" or slot.stats_supported]
    return [judge(slot.samples, key, slot.elapsed, warmup) for key in keys]


def _inconclusive_reasons(per_agent: Sequence[dict[str, Any]], warmup: float) -> list[str]:
    """Why growth was not judged: a run too short once for all agents, else each agent's resource and reason."""
    too_short = too_short_reason(warmup)
    reasons: list[str] = []
    for agent in per_agent:
        for key, reason in agent["inconclusive"].items():
            line = reason if reason == too_short else f"agent {agent['slot']} {key}: {reason}"
            if line not in reasons:
                reasons.append(line)
    return reasons


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
        f"soak {summary['verdict'].upper()}: {summary['agents']} agents, {summary['duration_s']:g}s, seed {summary['seed']}",
        *(f"  inconclusive: {reason}" for reason in summary["inconclusive_reasons"]),
        f"  prompts {summary['prompts']}, side runs (EOF mid-turn / SIGTERM) {summary['side_runs']}",
        f"  criterion: {summary['criterion']}",
    ]
    for agent in summary["per_agent"]:
        slopes = ", ".join(
            f"{k} {'n/a' if v is None else (f'{v / 2**20:+.2f} MiB/min' if k == 'rss' else f'{v:+.2f}/min')}"
            f"{' (not judged)' if k in agent['inconclusive'] else ''}"
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


def serve_command() -> list[str]:
    """`acp-green serve`: the default soaked agent, to which each slot adds its own --state-dir
    (SoakConfig.agent_command): a state directory, not --ephemeral, so the store's thread and
    database are soaked too."""
    return [sys.executable, "-m", "acp_green", "serve"]


def fresh_state_root(out_dir: str) -> str:
    """out_dir/state, emptied: where the default agent's state directories go, one per slot."""
    state = os.path.join(out_dir, "state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    return state


def main(cfg: SoakConfig) -> int:
    """The `acp-green soak` command: progress on stderr, the summary on stdout; 1 on failure
    (an inconclusive run exits 0: nothing was found wrong, and the summary says why it is not a pass)."""
    import click

    from .remote_link import is_agent_url

    if cfg.command and is_agent_url(cfg.command[0]):
        raise click.UsageError("soak measures each agent's own process (its memory, descriptors, exit and signals) and "
                               "starts it afresh: it needs a command to run, not a URL (`acp-green probe URL` checks a "
                               "remote agent)")
    where = f" (state directories under {cfg.state_root})" if cfg.state_root else ""
    click.echo(f"soak: {cfg.agents} x {' '.join(cfg.command)}{where} for {cfg.duration:g}s, seed {cfg.seed}", err=True)
    if not cfg.judges_growth():
        click.echo(f"soak: growth will be inconclusive: {too_short_reason(cfg.warmup)}", err=True)
    in_place = sys.stderr.isatty()
    shown = [False]

    def report(line: str) -> None:
        if shown[0]:  # an event line goes below the progress line, not over it
            click.echo("", err=True)
            shown[0] = False
        click.echo(line, err=True)

    def progress(line: str) -> None:
        if in_place:  # one line, rewritten each second
            click.echo(f"\r{line}\x1b[K", err=True, nl=False)
            shown[0] = True
        else:
            click.echo(line, err=True)

    summary = run_soak(cfg, report, progress)
    if shown[0]:
        click.echo("", err=True)
    click.echo(format_summary(summary))
    click.echo(f"  summary: {os.path.join(cfg.out_dir, 'summary.json')}")
    return 0 if summary["ok"] else 1
