"""Composable scenario steps: small callables run in order against one checked agent.

    result = run_scenario(["acp-green", "serve"], [
        initialize(), open_sessions(2), prompt("/wait", name="long"),
        cancel(after=updates_seen(0)), await_response("long"), close_stdin(),
    ])

Each step takes a `Ctx`; `run_scenario` finishes with the invariant checks of `CheckedAgent`.
"""

from __future__ import annotations

import signal as signals
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gevent

from .client import ClientPolicy, Pending
from .run import CheckedAgent, RunResult

__all__ = [
    "Ctx", "Step", "run_scenario", "initialize", "open_sessions", "prompt", "cancel", "set_mode",
    "flood", "pause_reading", "resume_reading", "close_stdin", "send_raw", "send_signal", "wait",
    "await_response", "updates_seen", "immediately",
]


@dataclass
class Ctx:
    """What steps share: the agent, its sessions and named pending requests."""

    agent: CheckedAgent
    sessions: list[str] = field(default_factory=list)
    pending: dict[str, Pending] = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)

    def session(self, index: int) -> str:
        return self.sessions[index % len(self.sessions)]


Step = Callable[[Ctx], None]
Moment = Callable[[Ctx, str], None]  # waits (cooperatively) until the moment to act has come


def run_scenario(command: Sequence[str], steps: Sequence[Step], policy: ClientPolicy | None = None,
                 env: dict[str, str] | None = None) -> RunResult:
    """Launch the agent, run the steps, end it, and return the checked result."""
    agent = CheckedAgent(command, policy, env=env)
    ctx = Ctx(agent)
    try:
        for step in steps:
            step(ctx)
            agent.check()
    finally:
        result = agent.finish()
    return result


# -- moments ---------------------------------------------------------------------------------
def immediately() -> Moment:
    """Act at once (for a cancel: right after the prompt, before the agent answered anything)."""
    return lambda ctx, session_id: None


def updates_seen(count: int, timeout: float = 30.0) -> Moment:
    """Act once `count` session/update notifications arrived for the session."""
    def moment(ctx: Ctx, session_id: str) -> None:
        ctx.agent.wait_for(lambda: len(ctx.agent.updates(session_id)) >= count, timeout, f"{count} updates")
    return moment


# -- steps -----------------------------------------------------------------------------------
def initialize(version: int = 1) -> Step:
    def step(ctx: Ctx) -> None:
        ctx.agent.initialize(version=version)
    return step


def open_sessions(count: int = 1, cwd: str = "/tmp") -> Step:
    """Open sessions; remembers their ids and the modes the agent offered."""
    def step(ctx: Ctx) -> None:
        for _ in range(count):
            result = ctx.agent.call("session/new", {"cwd": cwd, "mcpServers": []})
            ctx.sessions.append(result["sessionId"])
            modes = (result.get("modes") or {}).get("availableModes") or []
            ctx.modes = [m["id"] for m in modes]
    return step


def prompt(text: str, session: int = 0, name: str | None = None, wait: bool = False, must_cancel: bool = False) -> Step:
    """Send a prompt; `wait` blocks until it is answered; `name` lets later steps find it."""
    def step(ctx: Ctx) -> None:
        pending = ctx.agent.prompt(ctx.session(session), text)
        if must_cancel:
            ctx.agent.checker.expect_cancelled(pending.id)
        ctx.pending[name or f"prompt-{pending.id}"] = pending
        if wait:
            pending.response()
    return step


def cancel(session: int = 0, after: Moment | None = None, same_write_as: str | None = None) -> Step:
    """session/cancel at a chosen moment; `same_write_as` sends a prompt and the cancel in one write."""
    def step(ctx: Ctx) -> None:
        agent = ctx.agent
        session_id = ctx.session(session)
        if same_write_as is not None:
            message = agent.make_request("session/prompt", agent.prompt_params(session_id, same_write_as))
            agent.send(message, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
            ctx.pending[f"prompt-{message['id']}"] = agent.pending_for(message)
            return
        (after or immediately())(ctx, session_id)
        agent.cancel(session_id)
    return step


def await_response(name: str, timeout: float = 30.0) -> Step:
    def step(ctx: Ctx) -> None:
        ctx.pending[name].response(timeout)
    return step


def set_mode(mode: str | None = None, session: int = 0) -> Step:
    """session/set_mode (the first non-current mode offered when `mode` is None)."""
    def step(ctx: Ctx) -> None:
        target = mode or (ctx.modes[-1] if ctx.modes else "default")
        ctx.agent.request("session/set_mode", {"sessionId": ctx.session(session), "modeId": target}).response()
    return step


def flood(count: int, method: str = "session/set_mode", session: int = 0) -> Step:
    """Many requests in one write; waits for all the answers."""
    def step(ctx: Ctx) -> None:
        agent = ctx.agent
        params: dict[str, Any] = {"sessionId": ctx.session(session), "modeId": ctx.modes[0] if ctx.modes else "default"}
        messages = [agent.make_request(method, params) for _ in range(count)]
        agent.send(*messages)
        for message in messages:
            agent.pending_for(message).response()
    return step


def pause_reading(seconds: float | None = None) -> Step:
    """Stop reading the agent's stdout; for `seconds`, then resume, or until resume_reading()."""
    def step(ctx: Ctx) -> None:
        ctx.agent.pause_reading()
        if seconds is not None:
            gevent.sleep(seconds)
            ctx.agent.resume_reading()
    return step


def resume_reading() -> Step:
    return lambda ctx: ctx.agent.resume_reading()


def close_stdin() -> Step:
    return lambda ctx: ctx.agent.close_input()


def send_raw(data: bytes) -> Step:
    return lambda ctx: ctx.agent.send_raw(data)


def send_signal(signum: int = signals.SIGTERM) -> Step:
    return lambda ctx: ctx.agent.signal(signum)


def wait(seconds: float) -> Step:
    return lambda ctx: gevent.sleep(seconds)
