"""`acp-green probe`: conformance and concurrency checks against any stdio ACP agent.

Each check launches the agent afresh (so one failure cannot hide another), drives it from
outside, and reports a verdict with evidence. Every run also goes through the invariant
checker; the invariants are reported as checks of their own, naming the messages that broke
them. Nothing here knows which agent it talks to.

Verdicts follow the force of the rule: a broken MUST is `fail` (exit 1); an advisory row (what
real clients trip on although ACP allows it) is `warn` and never changes the exit code. A row
with nothing to check says `not exercised` (skip) instead of claiming the rule held. An agent
that needs a login gets one row saying so; the checks that need no session still run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal as signals
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import gevent

from ...errors import AUTH_REQUIRED, INVALID_PARAMS, METHOD_NOT_FOUND, RESOURCE_NOT_FOUND, SERVER_BUSY
from .client import ClientPolicy, Pending
from .invariants import ADVISORIES, INVARIANTS, Violation
from .run import CheckedAgent, RunResult

__all__ = ["CheckResult", "ProbeConfig", "ProbeReport", "run_probe", "format_table"]

PASS, FAIL, SKIP, WARN = "pass", "fail", "skip", "warn"
MUST, ADVISORY = "must", "advisory"
# A file the probe's client serves from memory, for the tool prompt to read (never on disk).
PROBE_FILE = "/tmp/acp-green-probe/notes.txt"
PROBE_FILE_TEXT = "written by acp-green probe\n"


@dataclass(slots=True)
class ProbeConfig:
    """What to launch and how to drive it."""

    command: list[str]
    long_prompt: str = "/wait"
    stream_prompt: str = "/stream 20000 256"
    timeout: float = 10.0  # how long any single answer may take before the check fails
    settle: float = 0.5  # how long the long prompt must still be running before we act
    sessions: int = 16
    exit_timeout: float = 8.0  # the runtime's shutdown grace is 5 s
    env: dict[str, str] | None = None
    tool_prompt: str = f"/read {PROBE_FILE}"  # a prompt that makes the agent use a tool on a file
    authenticate: str | None = None  # an authMethods id to call `authenticate` with after initialize
    keep_env: bool = False  # False: the agent gets a fresh, temporary XDG_STATE_HOME
    sessionless: bool = False  # set by the probe when the agent needs a login it did not get


@dataclass(slots=True)
class CheckResult:
    """One row of the report."""

    check: str
    verdict: str
    evidence: str
    force: str = MUST


@dataclass
class ProbeReport:
    """All rows, plus every invariant violation seen in any run."""

    command: list[str]
    results: list[CheckResult] = field(default_factory=list)  # MUST rows
    advisories: list[CheckResult] = field(default_factory=list)  # advisory rows: pass, warn or skip
    violations: list[Violation] = field(default_factory=list)
    warnings: list[Violation] = field(default_factory=list)  # broken advisories seen in the runs

    @property
    def ok(self) -> bool:
        return all(r.verdict != FAIL for r in self.results)

    def add(self, row: CheckResult) -> None:
        (self.advisories if row.force == ADVISORY else self.results).append(row)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "ok": self.ok,
            "checks": [asdict(r) for r in self.results],
            "advisories": [asdict(r) for r in self.advisories],
            "violations": [v.to_json() for v in self.violations],
            "warnings": [v.to_json() for v in self.warnings],
        }


class CheckFailed(Exception):
    """A check's verdict is fail; the message is the evidence."""


class CheckSkipped(Exception):
    """The check cannot be made against this agent; the message says why."""


class NeedsAuthentication(CheckSkipped):
    """session/new was refused for want of a login (-32000 naming authentication)."""


# -- helpers ---------------------------------------------------------------------------------
def _answer(agent: CheckedAgent, pending: Pending, cfg: ProbeConfig, what: str) -> dict[str, Any]:
    """The response, or CheckFailed when it does not come in time or the agent closed its stdout."""
    deadline = time.monotonic() + cfg.timeout
    while not pending.done:
        if agent.eof.is_set():
            raise CheckFailed(f"the agent closed its stdout before answering {what} (exit code {agent.proc.poll()})")
        left = deadline - time.monotonic()
        if left <= 0:
            raise CheckFailed(f"no response to {what} within {cfg.timeout:g}s")
        gevent.wait([pending.waitable, agent.eof], count=1, timeout=left)
    return pending.response(0)


def _result(agent: CheckedAgent, pending: Pending, cfg: ProbeConfig, what: str) -> Any:
    message = _answer(agent, pending, cfg, what)
    if "error" in message:
        raise CheckFailed(f"{what} failed: {json.dumps(message['error'])[:200]}")
    return message.get("result")


def _initialize(agent: CheckedAgent, cfg: ProbeConfig, version: int = 1) -> dict[str, Any]:
    """initialize, then `authenticate` when --authenticate named a method; the initialize result."""
    result = _result(agent, agent.request("initialize", agent.initialize_params(version=version)), cfg, f"initialize(v{version})")
    if cfg.authenticate is not None:
        _result(agent, agent.request("authenticate", {"methodId": cfg.authenticate}), cfg, f"authenticate({cfg.authenticate})")
    return result if isinstance(result, dict) else {}


def _ready(agent: CheckedAgent, cfg: ProbeConfig) -> str | None:
    """initialize + session/new; returns the session id (None when the agent needs a login)."""
    _initialize(agent, cfg)
    return None if cfg.sessionless else _new_session(agent, cfg)


def _ready_session(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize + session/new for a check that needs a session (never run sessionless); its id."""
    _initialize(agent, cfg)
    return _new_session(agent, cfg)


def _needs_login(error: Any) -> bool:
    """-32000 whose message names authentication: ACP's "auth required"."""
    return isinstance(error, dict) and error.get("code") == AUTH_REQUIRED and "auth" in str(error.get("message", "")).lower()


def _new_session_result(agent: CheckedAgent, cfg: ProbeConfig) -> dict[str, Any]:
    """session/new's result; NeedsAuthentication when the agent wants a login first."""
    if cfg.sessionless:
        raise NeedsAuthentication("skipped: needs authentication")
    answer = _answer(agent, agent.request("session/new", {"cwd": "/tmp", "mcpServers": []}), cfg, "session/new")
    if _needs_login(answer.get("error")):
        raise NeedsAuthentication(f"session/new answered {_brief(answer['error'])}")
    if "error" in answer:
        raise CheckFailed(f"session/new failed: {json.dumps(answer['error'])[:200]}")
    result = answer.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        raise CheckFailed(f"session/new gave no sessionId: {result!r}")
    return result


def _new_session(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    return _new_session_result(agent, cfg)["sessionId"]


def _ping(agent: CheckedAgent, cfg: ProbeConfig, what: str) -> None:
    """A request any agent answers (an unknown method: -32601): proof it still reads its input."""
    _answer(agent, agent.request("_acp_green_probe/ping", {}), cfg, what)


def _start_long(agent: CheckedAgent, session_id: str, cfg: ProbeConfig, text: str | None = None) -> Pending:
    """Send the long prompt and make sure it is still running `settle` seconds later."""
    pending = agent.prompt(session_id, text or cfg.long_prompt)
    gevent.sleep(cfg.settle)
    if pending.done:
        raise CheckSkipped(f"the long prompt {text or cfg.long_prompt!r} ended within {cfg.settle:g}s "
                           f"({_brief(pending.response(0))}); pass --long-prompt with one that runs until cancelled")
    return pending


def _answered_at(pending: Pending) -> float:
    """When a request that is `done` was answered (Pending.resolve sets the time before the response)."""
    assert pending.answered_at is not None
    return pending.answered_at


def _launch(cfg: ProbeConfig) -> CheckedAgent:
    """A fresh agent process with the probe's client (it serves PROBE_FILE from memory)."""
    agent = CheckedAgent(cfg.command, ClientPolicy(files={PROBE_FILE: PROBE_FILE_TEXT}), env=cfg.env)
    agent.exit_timeout = cfg.exit_timeout
    return agent


def _absorb(agent: CheckedAgent, other: RunResult) -> None:
    """Count a second process a check ran as part of the check's own run."""
    agent.checker.violations.extend(other.violations)
    agent.checker.advisories.extend(other.advisories)
    agent.checker.exercised.update(other.exercised)


def _stop_reason(message: dict[str, Any]) -> Any:
    result = message.get("result")
    return result.get("stopReason") if isinstance(result, dict) else None


def _brief(message: Any, limit: int = 160) -> str:
    text = json.dumps(message, separators=(",", ":"), default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the checks ------------------------------------------------------------------------------
def check_version(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize with v1 echoes 1; with an unknown future version the agent answers its own latest."""
    result = _initialize(agent, cfg, version=1)
    if result.get("protocolVersion") != 1:
        raise CheckFailed(f"initialize(protocolVersion=1) answered protocolVersion {result.get('protocolVersion')!r}")
    other = _launch(cfg)
    try:
        future = _initialize(other, cfg, version=999)
    finally:
        _absorb(agent, other.finish())
    got = future.get("protocolVersion")
    if not isinstance(got, int) or isinstance(got, bool) or not 1 <= got < 999:
        raise CheckFailed(f"initialize(protocolVersion=999) answered {got!r}; expected the agent's latest supported version")
    return f"v1 -> 1; v999 -> {got}"


def check_ids_echoed(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Ids 0, negative, string and large integers come back exactly, on errors too (-32601)."""
    _ready(agent, cfg)
    ids: list[Any] = [0, -7, "probe-id", 2**53 + 1, "1"]
    messages = [agent.make_request("_acp_green_probe/unknown", {}, request_id=i) for i in ids]
    agent.send(*messages)
    seen = []
    for message in messages:
        answer = _answer(agent, agent.pending_for(message), cfg, f"request id {message['id']!r}")
        if answer.get("id") != message["id"] or type(answer.get("id")) is not type(message["id"]):
            raise CheckFailed(f"sent id {message['id']!r}, got {answer.get('id')!r}")
        code = (answer.get("error") or {}).get("code")
        if code != METHOD_NOT_FOUND:
            raise CheckFailed(f"unknown method _acp_green_probe/unknown answered {_brief(answer)}, expected -32601")
        seen.append(repr(message["id"]))
    return f"echoed {', '.join(seen)}; unknown method -> -32601"


def check_notifications(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Notifications (session/cancel while idle, unknown, $/cancel_request) get no response."""
    session_id = _ready(agent, cfg) or "probe-no-session"
    agent.check()
    before = agent.checker.responses
    agent.send(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}},
        {"jsonrpc": "2.0", "method": "_acp_green_probe/notice", "params": {}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 424242}},
    )
    sentinel = agent.make_request("_acp_green_probe/ping", {})
    agent.send(sentinel)
    _answer(agent, agent.pending_for(sentinel), cfg, "a request after the notifications")
    agent.check()
    extra = agent.checker.responses - before - 1
    if extra:
        raise CheckFailed(f"{extra} response(s) arrived for 3 notifications")
    return "3 notifications, 0 responses (a request sent after them was answered)"


def check_parse_error(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """A garbage line gets -32700 with id null, and the connection keeps working."""
    _ready(agent, cfg)
    start = len(agent.records)
    agent.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    try:
        agent.wait_for(lambda: any(r.direction == "in" and isinstance(r.message, dict) and "error" in r.message
                                   and r.message.get("id") is None for r in agent.records[start:]),
                       cfg.timeout, "a -32700 response")
    except AssertionError:
        raise CheckFailed(f"no error response with id null within {cfg.timeout:g}s") from None
    error = next(r.message["error"] for r in agent.records[start:] if r.direction == "in" and isinstance(r.message, dict)
                 and "error" in r.message and r.message.get("id") is None)
    if error.get("code") != -32700:
        raise CheckFailed(f"garbage answered with code {error.get('code')}, expected -32700")
    _ping(agent, cfg, "the request after the garbage")
    return "-32700, id null; next request answered"


def check_init_and_new_one_write(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S2: initialize and session/new written together both succeed."""
    init = agent.make_request("initialize", agent.initialize_params())
    login = [agent.make_request("authenticate", {"methodId": cfg.authenticate})] if cfg.authenticate else []
    new = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    agent.send(init, *login, new)
    _result(agent, agent.pending_for(init), cfg, "initialize")
    for message in login:
        _result(agent, agent.pending_for(message), cfg, "authenticate")
    result = _result(agent, agent.pending_for(new), cfg, "session/new")
    # S2: a prompt written the moment the session/new response is read works.
    answer = _answer(agent, agent.prompt(result["sessionId"], "hello"), cfg, "a prompt right after session/new")
    if "error" in answer:
        raise CheckFailed(f"the prompt after session/new failed: {_brief(answer)}")
    return f"both answered in one write; prompt right after -> {_stop_reason(answer)}"


def check_cancel_long(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """A long prompt is cancelled by session/cancel and answers stopReason "cancelled"."""
    session_id = _ready_session(agent, cfg)
    pending = _start_long(agent, session_id, cfg)
    agent.checker.expect_cancelled(pending.id)
    sent = time.monotonic()
    agent.cancel(session_id)
    answer = _answer(agent, pending, cfg, "the cancelled prompt")
    if _stop_reason(answer) != "cancelled":
        raise CheckFailed(f"cancelled prompt answered {_brief(answer)}")
    return f"cancelled after {time.monotonic() - sent:.3f}s"


def check_cancel_same_write(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S11: a cancel in the same write as the prompt cancels that prompt."""
    session_id = _ready_session(agent, cfg)
    message = agent.make_request("session/prompt", agent.prompt_params(session_id, cfg.long_prompt))
    agent.send(message, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    answer = _answer(agent, agent.pending_for(message), cfg, "the prompt cancelled in the same write")
    if _stop_reason(answer) != "cancelled":
        # Only a prompt that cannot end by itself must answer cancelled: make sure this one cannot.
        running = _start_long(agent, session_id, cfg)
        agent.checker.expect_cancelled(running.id)
        agent.cancel(session_id)
        _answer(agent, running, cfg, "the long prompt after cancel")
        raise CheckFailed(f"answered {_brief(answer)}")
    return "answered cancelled"


def check_second_prompt(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S8: a second prompt on a busy session is refused at once (-32000); the first is unaffected.

    When it is not, the evidence says what the wire shows: the second was queued behind the
    first, ran alongside it, ended it, or was refused some other way."""
    session_id = _ready_session(agent, cfg)
    first = _start_long(agent, session_id, cfg)
    agent.checker.expect_cancelled(first.id)
    second = agent.prompt(session_id, "second")
    gevent.wait([first.waitable, second.waitable, agent.eof], count=1, timeout=cfg.timeout)
    if not first.done and not second.done:
        agent.cancel(session_id)
        first_answer = _answer(agent, first, cfg, "the first prompt after cancel")
        late = _answer(agent, second, cfg, "the second prompt")
        raise CheckFailed(f"queued: the second prompt got no answer while the first ran ({cfg.timeout:g}s); after "
                          f"session/cancel the first answered {_brief(first_answer, 80)}, then the second {_brief(late, 80)}")
    if first.done and not (second.done and _answered_at(second) <= _answered_at(first)):
        first_answer = first.response(0)
        later = _answer(agent, second, cfg, "the second prompt")
        raise CheckFailed(f"the first prompt answered {_brief(first_answer, 80)} once the second arrived, then the "
                          f"second answered {_brief(later, 80)}")
    answer = second.response(0)
    error = answer.get("error")
    if error is None:
        agent.cancel(session_id)
        _answer(agent, first, cfg, "the first prompt after cancel")
        raise CheckFailed(f"ran alongside: the second prompt answered {_brief(answer, 80)} while the first still ran")
    agent.cancel(session_id)
    first_answer = _answer(agent, first, cfg, "the first prompt after cancel")
    if not isinstance(error, dict) or error.get("code") != SERVER_BUSY:
        raise CheckFailed(f"refused with {_brief(error, 100)} while the first ran (expected -32000)")
    if _stop_reason(first_answer) != "cancelled":
        raise CheckFailed(f"first prompt answered {_brief(first_answer)} after cancel")
    reason = (error.get("data") or {}).get("reason") if isinstance(error.get("data"), dict) else None
    return f"-32000 ({reason or 'no reason'}); first prompt then cancelled normally"


def check_unknown_session(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Advisory: a prompt naming a session the agent never created is refused with ACP's -32002
    ("Resource not found"). -32602, what agents answered before ACP's ErrorCode named -32002,
    warns naming the newer code; so does any other answer."""
    _ready_session(agent, cfg)
    ghost = "acp-green-probe-no-such-session"
    answer = _answer(agent, agent.prompt(ghost, "hello"), cfg, "a prompt for an unknown session")
    error = answer.get("error")
    if not isinstance(error, dict):
        raise CheckFailed(f"a prompt for a session never created was accepted: {_brief(answer, 100)}; "
                          f"expected -32002 (Resource not found)")
    code = error.get("code")
    if code == INVALID_PARAMS:
        raise CheckFailed(f"answered -32602 (invalid params, the code older agents used); ACP's ErrorCode names "
                          f"-32002 (Resource not found) for an unknown session: {_brief(error, 100)}")
    if code != RESOURCE_NOT_FOUND:
        raise CheckFailed(f"answered {_brief(error, 100)}; expected -32002 (Resource not found)")
    reason = error.get("data", {}).get("reason") if isinstance(error.get("data"), dict) else None
    return f"-32002 ({reason or 'no reason'})"


def check_control_while_streaming(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S1/S10: set_mode and session/new are answered while a prompt streams."""
    _initialize(agent, cfg)
    new = _new_session_result(agent, cfg)
    session_id = new["sessionId"]
    modes = [m.get("id") for m in ((new.get("modes") or {}).get("availableModes") or [])]
    prompt = agent.prompt(session_id, cfg.stream_prompt)
    try:
        agent.wait_for(lambda: prompt.done or len(agent.updates(session_id)) >= 5, cfg.timeout, "the stream to start")
    except AssertionError:
        pass
    if prompt.done:
        gevent.sleep(0)
        prompt = _start_long(agent, session_id, cfg)
        agent.checker.expect_cancelled(prompt.id)
    controls = [("session/new", {"cwd": "/tmp", "mcpServers": []})]
    if len(modes) > 1:
        controls.insert(0, ("session/set_mode", {"sessionId": session_id, "modeId": modes[-1]}))
    notes = []
    streaming = True  # a finite stream may end on its own while a control is in flight
    for method, params in controls:
        while True:
            if prompt.done:  # a fast agent finished the stream: go on behind a prompt that waits
                prompt = _start_long(agent, session_id, cfg)
                agent.checker.expect_cancelled(prompt.id)
                streaming = False
            pending = agent.request(method, params)
            answer = _answer(agent, pending, cfg, method)
            if "error" in answer:
                raise CheckFailed(f"{method} during the prompt failed: {_brief(answer)}")
            overtaken = prompt.done and prompt.answered_at is not None and pending.answered_at is not None \
                and prompt.answered_at < pending.answered_at
            if not overtaken:
                break
            if not streaming:
                raise CheckFailed(f"{method} was answered only after the running prompt finished "
                                  f"({len(agent.updates(session_id))} updates)")
        notes.append(f"{method} in {_answered_at(pending) - pending.sent_at:.3f}s")
    if not prompt.done:
        agent.cancel(session_id)
    _answer(agent, prompt, cfg, "the streaming prompt")
    return "; ".join(notes) + " while the prompt ran"


def check_many_sessions(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Many sessions, one prompt each at once: every prompt is answered, none fails."""
    _initialize(agent, cfg)
    sessions = [_new_session(agent, cfg) for _ in range(cfg.sessions)]
    messages = [agent.make_request("session/prompt", agent.prompt_params(s, f"hello {i}")) for i, s in enumerate(sessions)]
    agent.send(*messages)
    reasons: dict[str, int] = {}
    for message in messages:
        answer = _answer(agent, agent.pending_for(message), cfg, f"prompt #{message['id']}")
        if "error" in answer:
            raise CheckFailed(f"prompt on one of {cfg.sessions} sessions failed: {_brief(answer)}")
        reason = str(_stop_reason(answer))
        reasons[reason] = reasons.get(reason, 0) + 1
    return f"{cfg.sessions} sessions, {cfg.sessions} prompts in one write: " + ", ".join(f"{n} {r}" for r, n in reasons.items())


def check_exit_on_eof(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """An idle agent exits (code 0) when its stdin closes; nothing it started survives."""
    _ready(agent, cfg)
    closed = time.monotonic()
    result = agent.finish()
    took = time.monotonic() - closed
    bad = [v for v in result.violations if v.invariant in ("exit_after_eof", "no_orphan_processes")]
    if bad:
        raise CheckFailed(str(bad[0]).splitlines()[0])
    if result.exit_code != 0:
        raise CheckFailed(f"exited with code {result.exit_code} after EOF")
    return f"exit 0 after {took:.2f}s"


def check_tool_prompt(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """The tool prompt is answered; what it sends (paths, tool calls) is judged by the invariant rows."""
    session_id = _ready_session(agent, cfg)
    answer = _answer(agent, agent.prompt(session_id, cfg.tool_prompt), cfg, "the tool prompt")
    if "error" in answer:
        raise CheckFailed(f"the tool prompt failed: {_brief(answer)}")
    tools = [u for u in agent.updates(session_id) if u.get("sessionUpdate") == "tool_call"]
    asked = sorted({r["method"] for r in agent.agent_requests})
    return (f"{_stop_reason(answer)}; {len(tools)} tool call(s)" + (f", asked the client: {', '.join(asked)}" if asked else "")
            + ("" if tools else f" (give --tool-prompt a prompt that makes this agent use a tool)"))


def check_answers_at_eof(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Advisory: a prompt still running when stdin closes is answered (cancelled) before the agent exits."""
    session_id = _ready_session(agent, cfg)
    pending = _start_long(agent, session_id, cfg)
    agent.answers_owed_at_eof = False  # judged here, as an advisory, not again as a broken MUST
    result = agent.finish()
    if result.killed:
        raise CheckSkipped("not exercised: the agent did not exit after EOF (see exit on EOF)")
    if not pending.done:
        raise CheckFailed(f"the prompt running at EOF got no answer before the agent exited (code {result.exit_code})")
    return f"the running prompt answered {_stop_reason(pending.response(0))} before exit {result.exit_code}"


def _signal_outcome(agent: CheckedAgent, cfg: ProbeConfig, signum: int) -> str:
    """How the agent ends on a signal during a running prompt: its exit and the prompt's answer."""
    session_id = None if cfg.sessionless else _ready(agent, cfg)
    if session_id is None:
        _initialize(agent, cfg)
    try:
        pending = _start_long(agent, session_id, cfg) if session_id is not None else None
    except CheckSkipped:  # no prompt that runs until cancelled: compare the idle agent's end
        pending = None
    agent.signal(signum)
    result = agent.finish()
    if result.killed:
        exit_text = "kept running (killed by the probe)"
    elif result.exit_code is not None and result.exit_code < 0:
        exit_text = "died of the signal"
    else:
        exit_text = f"exit {result.exit_code}"
    if pending is None:
        return exit_text
    answered = f"prompt answered {_stop_reason(pending.response(0))}" if pending.done else "prompt unanswered"
    return f"{exit_text}, {answered}"


def check_sighup(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Advisory: SIGHUP (the editor's terminal closed) ends the agent the way SIGTERM does."""
    on_term = _signal_outcome(agent, cfg, signals.SIGTERM)
    other = _launch(cfg)
    try:
        on_hup = _signal_outcome(other, cfg, signals.SIGHUP)
    finally:
        _absorb(agent, other.finish())
    if on_hup != on_term:
        raise CheckFailed(f"SIGTERM: {on_term}; SIGHUP: {on_hup}")
    return f"both: {on_term}"


# (row name, check, needs a session, force)
CHECKS: tuple[tuple[str, Callable[[CheckedAgent, ProbeConfig], str], bool, str], ...] = (
    ("version negotiation", check_version, False, MUST),
    ("ids echoed", check_ids_echoed, False, MUST),
    ("notifications unanswered", check_notifications, False, MUST),
    ("-32700 for garbage", check_parse_error, False, MUST),
    ("initialize+session/new in one write", check_init_and_new_one_write, True, MUST),
    ("cancel during a long prompt", check_cancel_long, True, MUST),
    ("cancel in the same write as the prompt", check_cancel_same_write, True, MUST),
    ("second prompt on a busy session", check_second_prompt, True, MUST),
    ("control during a streaming prompt", check_control_while_streaming, True, MUST),
    ("many sessions at once", check_many_sessions, True, MUST),
    ("a prompt that uses a tool", check_tool_prompt, True, MUST),
    ("exit on EOF", check_exit_on_eof, False, MUST),
    ("running prompt answered at EOF", check_answers_at_eof, True, ADVISORY),
    ("SIGHUP handled like SIGTERM", check_sighup, False, ADVISORY),
    ("unknown session answered -32002", check_unknown_session, True, ADVISORY),
)

# Invariant rows: what every run above was checked for, named as in the table, and what a row
# with nothing to check says.
_INVARIANT_ROWS = {
    "valid_json_rpc": ("stdout hygiene (every line JSON-RPC)", "the agent wrote nothing"),
    "schema": ("strict schema validity", "the agent wrote nothing"),
    "one_response_per_request": ("one response per request", "no request was sent"),
    "no_response_to_notification": ("no response to a notification", "no notification was sent"),
    "prompt_updates_in_order": ("prompt updates in order", "no /stream prompt was answered with indexed chunks"),
    "no_update_after_response": ("no update after the prompt response", "no prompt was answered"),
    "cancelled_answers_cancelled": ("cancelled prompt answers cancelled", "no prompt was cancelled while it ran"),
    "exit_after_eof": ("process exits after stdin closes", "no run ended"),
    "no_orphan_processes": ("no descendant survives", "the agent never exited by itself"),
    "absolute_paths": ("file paths sent to the client are absolute", "the agent sent no file path (see --tool-prompt)"),
    "tool_calls_finished": ("tool calls finish before the prompt response", "the agent reported no tool call"),
    "message_id_consistent": ("messageId consistent within a message", "no chunk carried a messageId"),
}


def _isolated(cfg: ProbeConfig) -> tuple[ProbeConfig, str | None]:
    """The config the agents run with: a fresh XDG_STATE_HOME unless keep_env; and that directory."""
    if cfg.keep_env:
        return cfg, None
    state = tempfile.mkdtemp(prefix="acp-green-probe-state-")
    return replace(cfg, env={**(os.environ if cfg.env is None else cfg.env), "XDG_STATE_HOME": state}), state


def _login_row(cfg: ProbeConfig, report: ProbeReport) -> tuple[CheckResult | None, int]:
    """Whether the agent needs a login: one run of initialize (+authenticate) and session/new.

    Returns the row to show (None when nothing about a login is worth saying) and the runs made."""
    agent = _launch(cfg)
    row: CheckResult | None = None
    try:
        init = _initialize(agent, cfg)
        methods = [m.get("id") for m in init.get("authMethods") or [] if isinstance(m, dict)]
        _new_session(agent, cfg)
        if cfg.authenticate is not None:
            row = CheckResult("authentication", PASS, f"authenticate({cfg.authenticate}) then session/new succeeded")
    except NeedsAuthentication as exc:
        offered = f"authMethods: {', '.join(map(str, methods))}" if methods else "no authMethods advertised"
        how = f"authenticate({cfg.authenticate}) did not help" if cfg.authenticate else "run with --authenticate METHOD_ID"
        row = CheckResult("authentication", SKIP, f"needs authentication: {exc}; {offered}; checks that need a session "
                                                  f"are skipped ({how})")
    except Exception as exc:  # the checks below say what is wrong, one by one
        if cfg.authenticate is not None:
            row = CheckResult("authentication", FAIL, f"{type(exc).__name__}: {exc}" if not isinstance(exc, CheckFailed) else str(exc))
    finally:
        result = agent.finish()
    report.violations.extend(result.violations)
    report.warnings.extend(result.advisories)
    return row, 1


def run_probe(cfg: ProbeConfig, progress: Callable[[CheckResult], None] | None = None,
              only: Sequence[str] = ()) -> ProbeReport:
    """Run every check (or those whose names contain one of `only`) and the invariant rows."""
    cfg, state_dir = _isolated(cfg)
    try:
        return _run(cfg, progress or (lambda row: None), only)
    finally:
        if state_dir is not None:
            shutil.rmtree(state_dir, ignore_errors=True)


def _run(cfg: ProbeConfig, progress: Callable[[CheckResult], None], only: Sequence[str]) -> ProbeReport:
    report = ProbeReport(list(cfg.command))
    exercised: dict[str, int] = {}
    runs = 0
    try:
        login, runs = _login_row(cfg, report)
    except OSError as exc:
        report.add(CheckResult("start", FAIL, f"cannot start {cfg.command[0]!r}: {exc}"))
        return report
    if login is not None:
        report.add(login)
        progress(login)
        cfg = replace(cfg, sessionless=login.verdict != PASS)
    for name, check, needs_session, force in CHECKS:
        if only and not any(o in name for o in only):
            continue
        if needs_session and cfg.sessionless:
            row = CheckResult(name, SKIP, "skipped: needs authentication", force)
            report.add(row)
            progress(row)
            continue
        agent = _launch(cfg)
        runs += 1
        try:
            row = CheckResult(name, PASS, check(agent, cfg), force)
        except CheckFailed as exc:
            row = CheckResult(name, WARN if force == ADVISORY else FAIL, str(exc), force)
        except CheckSkipped as exc:
            row = CheckResult(name, SKIP, str(exc), force)
        except Exception as exc:  # the agent crashed, closed its stdout, answered nonsense...
            row = CheckResult(name, WARN if force == ADVISORY else FAIL, f"{type(exc).__name__}: {exc}", force)
        finally:
            result = agent.finish()
        report.violations.extend(result.violations)
        report.warnings.extend(result.advisories)
        for key, count in result.exercised.items():
            exercised[key] = exercised.get(key, 0) + count
        # An exit the agent chose after EOF; one the probe caused (a kill, a signal) has its own row.
        if row.verdict == PASS and result.exit_code not in (0, None) and name != "exit on EOF" \
                and result.ended_by == "eof" and not result.killed:
            row = CheckResult(name, FAIL, f"{row.evidence}; then the agent exited with code {result.exit_code}", force)
        report.add(row)
        progress(row)
    for invariant in (*INVARIANTS, *ADVISORIES):
        advisory = invariant in ADVISORIES
        title, idle = _INVARIANT_ROWS[invariant]
        broken = [v for v in (report.warnings if advisory else report.violations) if v.invariant == invariant]
        if broken:
            first = broken[0]
            evidence = f"{len(broken)} violation(s); first: {first.detail}" + "".join(f" | {m[:110]}" for m in first.messages[:2])
            row = CheckResult(title, WARN if advisory else FAIL, evidence)
        elif not runs:
            row = CheckResult(title, SKIP, "no check ran")
        elif not exercised.get(invariant):
            row = CheckResult(title, SKIP, f"not exercised: {idle}")
        else:
            row = CheckResult(title, PASS, f"held in all {runs} runs ({exercised[invariant]} checked)")
        row.force = ADVISORY if advisory else MUST
        report.add(row)
        progress(row)
    return report


def _rows_table(rows: Sequence[CheckResult], width: int) -> list[str]:
    import textwrap

    name_w = max([len(r.check) for r in rows] + [10])
    lines = [f"{'check'.ljust(name_w)}  verdict  evidence", f"{'-' * name_w}  -------  {'-' * 40}"]
    for row in rows:
        wrapped = textwrap.wrap(row.evidence, max(30, width - name_w - 11)) or [""]
        lines.append(f"{row.check.ljust(name_w)}  {row.verdict.upper().ljust(7)}  {wrapped[0]}")
        lines.extend(f"{'':{name_w}}  {'':7}  {more}" for more in wrapped[1:])
    return lines


def format_table(report: ProbeReport, width: int = 100) -> str:
    """Plain-text tables: the MUST rows, then the advisory rows apart; each wraps its evidence."""
    lines = _rows_table(report.results, width)
    failed = sum(1 for r in report.results if r.verdict == FAIL)
    skipped = sum(1 for r in report.results if r.verdict == SKIP)
    if report.advisories:
        lines += ["", "advisory (ACP allows it, clients trip on it; never fails the probe)", ""]
        lines += _rows_table(report.advisories, width)
    warned = sum(1 for r in report.advisories if r.verdict == WARN)
    lines.append("")
    lines.append(f"{len(report.results)} checks: {len(report.results) - failed - skipped} passed, {failed} failed, {skipped} skipped"
                 + (f"; {len(report.advisories)} advisories: {warned} warned" if report.advisories else ""))
    return "\n".join(lines)


def distinct(violations: Sequence[Violation]) -> list[tuple[Violation, int]]:
    """Each violation once (by invariant and detail), with how many times it was seen."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for violation in violations:
        entry = seen.setdefault((violation.invariant, violation.detail), [violation, 0])
        entry[1] += 1
    return [(v, n) for v, n in seen.values()]


def main(cfg: ProbeConfig, as_json: bool = False, only: Sequence[str] = ()) -> int:
    """The `acp-green probe` command: progress on stderr, the table or JSON on stdout; 1 on failure."""
    import click

    def progress(row: CheckResult) -> None:
        click.echo(f"  {row.verdict:<4}  {row.check}", err=True)

    unknown = [o for o in only if not any(o in name for name, *_ in CHECKS)]
    if unknown:
        raise click.UsageError(f"no check matches {', '.join(map(repr, unknown))}; checks: {', '.join(n for n, *_ in CHECKS)}")
    click.echo(f"probing {' '.join(cfg.command)}", err=True)
    report = run_probe(cfg, progress, only)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(format_table(report))
        for violation, count in distinct([*report.violations, *report.warnings])[:10]:
            click.echo(f"\n{violation}" + (f"\n    (seen {count} times)" if count > 1 else ""))
    return 0 if report.ok else 1
