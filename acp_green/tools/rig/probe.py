"""`acp-green probe`: conformance and concurrency checks against any stdio ACP agent.

Each check launches the agent afresh (so one failure cannot hide another), drives it from
outside, and reports a verdict with evidence. Every run also goes through the invariant
checker; the invariants are reported as checks of their own, naming the messages that broke
them. Nothing here knows which agent it talks to.

Verdicts follow the force of the rule, and each row cites it (`basis`, from probe_rules.py): a
row is a MUST only where ACP or JSON-RPC 2.0 says MUST, and a broken one is `fail` (exit 1) and
quotes the wire that proves it; an advisory row (what ACP says without a MUST) and a row of
acp_green's own advice (no ACP rule: S2, S8, S13, what the agent's process does) are `warn` and
never change the exit code. One fault is counted by the row whose rule it breaks, not again by
another (the schema row leaves a response's id to the id rows). What the agent leaves running
is judged after a settle window (settled.py), so a child that exits on its own a moment after
the agent does not flip the verdict between reruns. A row with nothing to check
says `not exercised` (skip) instead of claiming the rule held, and names the option that would
exercise it when the demo's default prompts did not. An agent that needs a login (-32000 at any
method), that cannot open a session, or that speaks only the v2 draft gets one row saying so;
the checks that need no session still run.

`ask=2` (`--protocol 2`) asks every run for the v2 draft: a prompt is then a whole turn
(probe_turns.Turn: acknowledged with {messageId}, ended by an idle state_update, in either
order; a turn ended with stopReason "error" reads as v1's error answer, so v2's -32000 is a
login), the rows adapt (checks_for; a cancel follows v2's session/cancel, which also cancels a
prompt not yet inserted, answered -32800), and an agent that does not answer 2 gets one row
saying so, nothing else.
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

from ...errors import AUTH_REQUIRED, INVALID_PARAMS, REQUEST_CANCELLED, RESOURCE_NOT_FOUND, SERVER_BUSY
from ...rpc.wire import id_key, is_valid_id
from ...terminal_text import shown
from .client import ClientPolicy, Pending, Record
from .invariants import ADVISORIES, INVARIANTS, PROBE_METHOD_PREFIX, Violation, render
from .probe_rules import ADVISORY, MUST, OWN, OWN_ADVICE, rule_for
from .probe_turns import Turn, TurnFollower
from .remote_link import is_agent_url, remote_target, shown_command
from .run import CheckedAgent, RunResult
from .settled import SETTLE_WINDOW, SettledAgent

__all__ = ["CheckResult", "ProbeConfig", "ProbeReport", "run_probe", "format_table"]

PASS, FAIL, SKIP, WARN = "pass", "fail", "skip", "warn"
# Forces (probe_rules.py): MUST (ACP or JSON-RPC 2.0 says MUST: a FAIL exits 1), ADVISORY (what ACP
# says without a MUST) and OWN (acp_green's own advice); the last two warn, never fail.
# The file the probe offers: written into a per-run temporary directory (each session's cwd),
# and served by the probe's client from memory too. `{file}` in a prompt stands for its path.
PROBE_FILE_NAME = "notes.txt"
PROBE_FILE_TEXT = "written by acp-green probe\n"
# The defaults are commands of acp-green's demo agent; another agent needs its own prompts.
DEMO_LONG_PROMPT = "/wait"
DEMO_STREAM_PROMPT = "/stream 20000 256"
DEMO_TOOL_PROMPT = "/read {file}"
UNSUPPORTED_VERSION = -32022  # ACP v2's "no version at or below the one asked for"
# Refusals that say "busy", not "log in", although they share -32000 (acp_green's S8).
_BUSY_REASONS = frozenset({"session_busy", "connection_busy", "output_backlog"})
# What a row that was not exercised needs, said once below the table.
NEEDS = {
    "--long-prompt": "a prompt that runs until cancelled: the default, /wait, is a command of acp-green's demo agent; "
                     "pass --long-prompt TEXT (e.g. a request for a 2000-word essay)",
    "--tool-prompt": "a prompt that makes the agent use a tool on the file the probe offers: the default, /read {file}, is "
                     "a command of acp-green's demo agent; pass --tool-prompt TEXT ({file} is replaced by the file's path)",
    "--stream-prompt": "a prompt answered in the demo's `/stream N` grammar (chunks numbered 0:, 1:, ...): only agents "
                       "that follow it can be checked for chunk order",
}


@dataclass(slots=True)
class ProbeConfig:
    """What to launch and how to drive it."""

    command: list[str]
    long_prompt: str = DEMO_LONG_PROMPT
    stream_prompt: str = DEMO_STREAM_PROMPT
    timeout: float = 10.0  # how long any single answer may take before the check fails
    settle: float = 0.5  # how long the long prompt must still be running before we act
    sessions: int = 16
    exit_timeout: float = 8.0  # the runtime's shutdown grace is 5 s
    settle_window: float = SETTLE_WINDOW  # how long what the agent started may take to exit after it (settled.py)
    env: dict[str, str] | None = None
    tool_prompt: str = DEMO_TOOL_PROMPT  # a prompt that makes the agent use a tool; {file}: the offered file
    authenticate: str | None = None  # an authMethods id to call `authenticate` with after initialize
    keep_env: bool = False  # False: the agent gets a fresh, temporary XDG_STATE_HOME
    ask: int = 1  # the protocolVersion every run's initialize asks for (--protocol): 2 grades v2 sessions and turns
    # Set by the probe itself: ------------------------------------------------------------------
    sessionless: bool = False  # no session can be opened (a login is needed, or not ACP v1): why_sessionless says why
    why_sessionless: str = ""
    workspace: str = ""  # the per-run temporary directory: each session's cwd, holds the offered file
    protocol: Any = 1  # what the agent answers to initialize(protocolVersion=ask)
    auth_methods: tuple[str, ...] = ()  # the ids of the agent's authMethods

    @property
    def offered_file(self) -> str:
        return os.path.join(self.workspace or tempfile.gettempdir(), PROBE_FILE_NAME)

    @property
    def remote(self) -> bool:
        """The agent is reached at a URL (remote_link.py): there is no process of its own to judge."""
        return bool(self.command) and is_agent_url(self.command[0])


@dataclass(slots=True)
class CheckResult:
    """One row of the report; a failing (or warning) row quotes the wire that proves it."""

    check: str
    verdict: str
    evidence: str
    force: str = MUST
    wire: list[str] = field(default_factory=list)  # the messages (trimmed) that prove a FAIL or WARN
    needs: str = ""  # the option that would let a skipped row be exercised (a key of NEEDS)
    basis: str = ""  # the sentence of ACP or JSON-RPC 2.0 the row rests on, or "acp_green's own advice ..." (probe_rules.py)


@dataclass
class ProbeReport:
    """All rows, plus every invariant violation seen in any run."""

    command: list[str]
    results: list[CheckResult] = field(default_factory=list)  # MUST rows
    advisories: list[CheckResult] = field(default_factory=list)  # advisory and own-advice rows: pass, warn or skip
    violations: list[Violation] = field(default_factory=list)
    warnings: list[Violation] = field(default_factory=list)  # broken advisories seen in the runs
    offered_file: str = ""  # the file the probe offered the agent (in a per-run temporary directory)
    protocol: int = 1  # the version the probe asked for (--protocol): some rows cite v2's sentence

    @property
    def ok(self) -> bool:
        return all(r.verdict != FAIL for r in self.results)

    def add(self, row: CheckResult) -> None:
        """Add a row, citing what it rests on (probe_rules.py) and in the table of its force."""
        rule = rule_for(row.check)
        row.basis = row.basis or rule.cited(self.protocol)
        if rule.basis:
            row.force = rule.force
        (self.advisories if row.force in (ADVISORY, OWN) else self.results).append(row)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "ok": self.ok,
            "offered_file": self.offered_file,
            "protocol_asked": self.protocol,
            "checks": [asdict(r) for r in self.results],
            "advisories": [asdict(r) for r in self.advisories],
            "violations": [v.to_json() for v in self.violations],
            "warnings": [v.to_json() for v in self.warnings],
        }


class CheckFailed(Exception):
    """A check's verdict is fail; the message is the evidence, `wire` the records that prove it."""

    def __init__(self, evidence: str, wire: Sequence[Record] = ()) -> None:
        super().__init__(evidence)
        self.wire = list(wire)


class CheckSkipped(Exception):
    """The check cannot be made against this agent; the message says why, `needs` what would help."""

    def __init__(self, evidence: str, needs: str = "", wire: Sequence[Record] = ()) -> None:
        super().__init__(evidence)
        self.needs = needs
        self.wire = list(wire)


class NeedsAuthentication(CheckSkipped):
    """A request was refused for want of a login: -32000 (ACP's "Authentication required")."""


# -- helpers ---------------------------------------------------------------------------------
def _exchange(agent: CheckedAgent, *pendings: Pending) -> list[Record]:
    """The requests of `pendings` and their answers, as they went over the wire."""
    keys = {id_key(p.id) for p in pendings}
    found = []
    for record in agent.records:
        message = record.message
        if isinstance(message, dict) and is_valid_id(message.get("id")) and "id" in message and id_key(message["id"]) in keys \
                and (record.direction == "out") == ("method" in message):
            found.append(record)
    return found + [p.end for p in pendings if isinstance(p, Turn) and p.end is not None]  # a v2 turn's end


def _strays(agent: CheckedAgent, since: float, limit: int = 2) -> list[Record]:
    """Responses since `since` that answer nothing the client is waiting for (no id, id null or
    unknown): what an agent wrote instead of the answer that never came."""
    found = []
    for record in agent.records:
        message = record.message
        if record.t < since or record.direction != "in" or not isinstance(message, dict) or "method" in message:
            continue
        rid = message.get("id")
        if "id" not in message or not is_valid_id(rid) or rid is None or id_key(rid) not in agent.pending:
            found.append(record)
    return found[:limit]


def _login_refusal(error: Any, cfg: ProbeConfig) -> bool:
    """-32000 is ACP's "Authentication required" at any method; a refusal that says "busy" is not one.

    The code is the signal when the agent advertises authMethods; without them, only when the
    message names authentication."""
    if not isinstance(error, dict) or error.get("code") != AUTH_REQUIRED:
        return False
    data = error.get("data")
    if isinstance(data, dict) and data.get("reason") in _BUSY_REASONS:
        return False
    return bool(cfg.auth_methods) or "auth" in str(error.get("message", "")).lower()


def _answer(agent: CheckedAgent, pending: Pending, cfg: ProbeConfig, what: str, *, login_check: bool = True) -> dict[str, Any]:
    """The response, or CheckFailed when it does not come in time or the agent closed its stdout;
    NeedsAuthentication when the agent refuses for want of a login."""
    deadline = time.monotonic() + cfg.timeout
    while not pending.done:
        if agent.eof.is_set():
            if agent.remote is not None:
                notes = agent.stderr_text(0).strip().splitlines()
                raise CheckFailed(f"the connection to the agent ended before it answered {what}"
                                  + (f" ({notes[-1][:300]})" if notes else ""), _exchange(agent, pending))
            raise CheckFailed(f"the agent closed its stdout before answering {what} (exit code {agent.proc.poll()})",
                              _exchange(agent, pending))
        left = deadline - time.monotonic()
        if left <= 0:
            agent.check()
            agent.checker.gave_up(pending.id, cfg.timeout)
            if isinstance(pending, Turn) and pending.ack is not None:
                raise CheckFailed(f"{what} was acknowledged, but its turn got no idle state_update within {cfg.timeout:g}s",
                                  _exchange(agent, pending))
            raise CheckFailed(f"no response to {what} within {cfg.timeout:g}s",
                              _exchange(agent, pending) + _strays(agent, pending.sent_at))
        gevent.wait([pending.waitable, agent.eof], count=1, timeout=left)
    message = pending.response(0)
    if login_check and _login_refusal(message.get("error"), cfg):
        raise NeedsAuthentication(f"{pending.method} answered {_brief(message['error'])}", wire=_exchange(agent, pending))
    return message


def _result(agent: CheckedAgent, pending: Pending, cfg: ProbeConfig, what: str) -> Any:
    message = _answer(agent, pending, cfg, what)
    if "error" in message:
        raise CheckFailed(f"{what} failed: {json.dumps(message['error'])[:200]}", _exchange(agent, pending))
    return message.get("result")


def _initialize_params(agent: CheckedAgent, version: int) -> dict[str, Any]:
    """initialize's params: v2 (draft) names them `info` and `capabilities`; any other version the v1 way."""
    if version == 2:
        return {"protocolVersion": 2, "info": {"name": "acp-green-probe", "version": "0.1.0"}, "capabilities": {}}
    return agent.initialize_params(version=version)


def _initialize(agent: CheckedAgent, cfg: ProbeConfig, version: int | None = None) -> dict[str, Any]:
    """initialize (with the version the agent speaks unless given), then `authenticate` when
    --authenticate named a method and the agent speaks v1; the initialize result."""
    version = (cfg.protocol if cfg.protocol in (1, 2) else 1) if version is None else version
    pending = agent.request("initialize", _initialize_params(agent, version))
    result = _result(agent, pending, cfg, f"initialize(v{version})")
    result = result if isinstance(result, dict) else {}
    if cfg.authenticate is not None and result.get("protocolVersion") == 1:
        _result(agent, agent.request("authenticate", {"methodId": cfg.authenticate}), cfg, f"authenticate({cfg.authenticate})")
    return result


def _session_params(cfg: ProbeConfig) -> dict[str, Any]:
    return {"cwd": cfg.workspace or tempfile.gettempdir(), "mcpServers": []}


def _ready(agent: CheckedAgent, cfg: ProbeConfig) -> str | None:
    """initialize + session/new; returns the session id (None when no session can be opened)."""
    _initialize(agent, cfg)
    return None if cfg.sessionless else _new_session(agent, cfg)


def _ready_session(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize + session/new for a check that needs a session (never run sessionless); its id."""
    _initialize(agent, cfg)
    return _new_session(agent, cfg)


def _new_session_result(agent: CheckedAgent, cfg: ProbeConfig) -> dict[str, Any]:
    """session/new's result; NeedsAuthentication when the agent wants a login first."""
    if cfg.sessionless:
        raise CheckSkipped(f"skipped: {cfg.why_sessionless}")
    pending = agent.request("session/new", _session_params(cfg))
    answer = _answer(agent, pending, cfg, "session/new")
    if "error" in answer:
        raise CheckFailed(f"session/new failed: {json.dumps(answer['error'])[:200]}", _exchange(agent, pending))
    result = answer.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        raise CheckFailed(f"session/new gave no sessionId: {result!r}", _exchange(agent, pending))
    return result


def _new_session(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    return _new_session_result(agent, cfg)["sessionId"]


def _ping(agent: CheckedAgent, cfg: ProbeConfig, what: str) -> None:
    """A request any agent answers (an unknown method: -32601 or some answer): proof it still reads its input."""
    _answer(agent, agent.request(f"{PROBE_METHOD_PREFIX}ping", {}), cfg, what, login_check=False)


def _start_long(agent: CheckedAgent, session_id: str, cfg: ProbeConfig, text: str | None = None) -> Pending:
    """Send the long prompt and make sure it is still running `settle` seconds later."""
    pending = agent.prompt(session_id, text or cfg.long_prompt)
    gevent.sleep(cfg.settle)
    if pending.done:
        answer = pending.response(0)
        if _login_refusal(answer.get("error"), cfg):
            raise NeedsAuthentication(f"session/prompt answered {_brief(answer['error'])}", wire=_exchange(agent, pending))
        ended = _stop_reason(answer) or _brief(answer.get("error"), 80)
        raise CheckSkipped(f"the long prompt {text or cfg.long_prompt!r} ended within {cfg.settle:g}s ({ended})",
                           needs="--long-prompt")
    return pending


def _answered_at(pending: Pending) -> float:
    """When a request that is `done` was answered (Pending.resolve sets the time before the response)."""
    assert pending.answered_at is not None
    return pending.answered_at


def _launch(cfg: ProbeConfig) -> CheckedAgent:
    """A fresh agent process with the probe's client (it serves the offered file from memory too).

    ACP owes no answer to a request still running when the client closes stdin: the probe
    judges that as an advisory of its own, and reports what it waited for in vain itself. Nor
    does ACP forbid session-level updates between turns. What the agent started is judged after
    the settle window (settled.py): a child that exits on its own within it survived nothing."""
    agent = SettledAgent(cfg.command, ClientPolicy(files={cfg.offered_file: PROBE_FILE_TEXT}), env=cfg.env)
    agent.settle = cfg.settle_window
    if cfg.ask == 2 and cfg.protocol == 2:
        TurnFollower(agent.client)  # under the v2 draft, each prompt's Pending is its whole turn
    agent.exit_timeout = cfg.exit_timeout
    agent.owed_at_end = False
    agent.checker.session_updates_between_turns = True  # ACP's rule, not acp_green's stricter S5
    agent.checker.leaves_ids = True  # an id fault is the id rows' (ids echoed, one response per request...), counted once
    return agent


def _absorb(agent: CheckedAgent, other: CheckedAgent) -> None:
    """End a second process a check ran, and count it as part of the check's own run."""
    result = other.finish()
    agent.checker.violations.extend(result.violations)
    agent.checker.advisories.extend(result.advisories)
    agent.checker.exercised.update(result.exercised)
    agent.checker.schema_notes.extend(other.checker.schema_notes)


def _stop_reason(message: dict[str, Any]) -> Any:
    result = message.get("result")
    return result.get("stopReason") if isinstance(result, dict) else None


def _brief(message: Any, limit: int = 160) -> str:
    text = json.dumps(message, separators=(",", ":"), default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the checks ------------------------------------------------------------------------------
def check_version(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize with v1 echoes 1 (or, from an agent without v1, its latest, or v2's -32022); with an
    unknown future version the agent answers its own latest."""
    pending = agent.request("initialize", _initialize_params(agent, 1))
    answer = _answer(agent, pending, cfg, "initialize(v1)", login_check=False)
    error = answer.get("error")
    got_v1: Any = None
    if isinstance(error, dict) and error.get("code") == UNSUPPORTED_VERSION:
        first = "-32022 (no version at or below 1: the v2 draft's rule)"
    elif error is not None:
        raise CheckFailed(f"initialize(protocolVersion=1) failed: {_brief(error)}", _exchange(agent, pending))
    else:
        got_v1 = answer["result"].get("protocolVersion") if isinstance(answer.get("result"), dict) else None
        if not isinstance(got_v1, int) or isinstance(got_v1, bool) or got_v1 < 1:
            raise CheckFailed(f"initialize(protocolVersion=1) answered protocolVersion {got_v1!r}", _exchange(agent, pending))
        first = "1" if got_v1 == 1 else f"{got_v1} (its latest: it has no v1)"
    v1_wire = _exchange(agent, pending)
    other = _launch(cfg)
    try:
        ask = other.request("initialize", _initialize_params(other, 999))
        future = _answer(other, ask, cfg, "initialize(v999)", login_check=False)
        wire = _exchange(other, ask)
    finally:
        _absorb(agent, other)
    got = future.get("result", {}).get("protocolVersion") if isinstance(future.get("result"), dict) else None
    if not isinstance(got, int) or isinstance(got, bool) or not 1 <= got < 999:
        raise CheckFailed(f"initialize(protocolVersion=999) answered {_brief(future.get('error', got), 100)}; expected the "
                          "agent's latest supported version", wire)
    if got_v1 is not None and got_v1 != 1 and got_v1 != got:
        raise CheckFailed(f"initialize(protocolVersion=1) answered {got_v1}, which is neither 1 nor its latest: 999 answered "
                          f"{got}", v1_wire + wire)
    note = " (the ACP v2 draft: that run is validated against the v2 draft schema)" if got == 2 else ""
    return f"v1 -> {first}; v999 -> {got}{note}"


def check_ids_echoed(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Ids 0, negative, string and large integers come back exactly, on whatever answer the agent gives.

    (That an unknown method should be answered -32601 is an advisory row of its own.)"""
    _ready(agent, cfg)
    ids: list[Any] = [0, -7, "probe-id", 2**53 + 1, "1"]
    messages = [agent.make_request(f"{PROBE_METHOD_PREFIX}unknown", {}, request_id=i) for i in ids]
    agent.send(*messages)
    seen = []
    for message in messages:
        pending = agent.pending_for(message)
        answer = _answer(agent, pending, cfg, f"request id {message['id']!r}", login_check=False)  # any answer shows the id
        if answer.get("id") != message["id"] or type(answer.get("id")) is not type(message["id"]):
            raise CheckFailed(f"sent id {message['id']!r}, got {answer.get('id')!r}", _exchange(agent, pending))
        seen.append(repr(message["id"]))
    return f"echoed {', '.join(seen)}"


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
    sentinel = agent.make_request(f"{PROBE_METHOD_PREFIX}ping", {})
    agent.send(sentinel)
    _answer(agent, agent.pending_for(sentinel), cfg, "a request after the notifications", login_check=False)
    agent.check()
    extra = agent.checker.responses - before - 1
    if extra:
        raise CheckFailed(f"{extra} response(s) arrived for 3 notifications", agent.records[-5:])
    return "3 notifications, 0 responses (a request sent after them was answered)"


def check_parse_error(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """A garbage line gets -32700 with an `id` member that is null, and the connection keeps working."""
    _ready(agent, cfg)
    start = len(agent.records)
    agent.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
    garbage = agent.records[start]

    def error_answer() -> Record | None:
        return next((r for r in agent.records[start:] if r.direction == "in" and isinstance(r.message, dict)
                     and "error" in r.message and "method" not in r.message and r.message.get("id") is None), None)

    try:
        agent.wait_for(error_answer, cfg.timeout, "a -32700 response")
    except AssertionError:
        raise CheckFailed(f"no error response with id null within {cfg.timeout:g}s", [garbage]) from None
    record = error_answer()
    assert record is not None
    if "id" not in record.message:
        raise CheckFailed("garbage answered with an error that has no `id` member (JSON-RPC: id null)", [garbage, record])
    error = record.message["error"]
    if not isinstance(error, dict) or error.get("code") != -32700:
        code = error.get("code") if isinstance(error, dict) else error
        raise CheckFailed(f"garbage answered with code {code!r}, expected -32700", [garbage, record])
    _ping(agent, cfg, "the request after the garbage")
    return "-32700, id null; next request answered"


def check_init_and_new_one_write(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S2: initialize and session/new written together both succeed."""
    init = agent.make_request("initialize", _initialize_params(agent, cfg.ask))
    login = [agent.make_request("authenticate", {"methodId": cfg.authenticate})] if cfg.authenticate else []
    new = agent.make_request("session/new", _session_params(cfg))
    agent.send(init, *login, new)
    _result(agent, agent.pending_for(init), cfg, "initialize")
    for message in login:
        _result(agent, agent.pending_for(message), cfg, "authenticate")
    result = _result(agent, agent.pending_for(new), cfg, "session/new")
    # S2: a prompt written the moment the session/new response is read works.
    pending = agent.prompt(result["sessionId"], "hello")
    answer = _answer(agent, pending, cfg, "a prompt right after session/new")
    if "error" in answer:
        raise CheckFailed(f"the prompt after session/new failed: {_brief(answer)}", _exchange(agent, pending))
    return f"both answered in one write; prompt right after -> {_stop_reason(answer)}"


def _cancelled_before_insertion(pending: Pending, answer: dict[str, Any]) -> dict[str, Any] | None:
    """Under v2, the error a prompt was answered with instead of being inserted (v2's session/cancel
    "cancels ... its prompts not yet inserted": answered -32800 Request Cancelled, no turn ran);
    None for a turn that ran, and always under v1 (a cancelled prompt answers `cancelled`, never
    an error)."""
    error = answer.get("error")
    if not isinstance(pending, Turn) or not isinstance(error, dict) or pending.end is not None:
        return None
    return error


def check_cancel_long(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """A long prompt is cancelled by session/cancel and answers stopReason "cancelled" (v2: its turn
    ends idle with stopReason "cancelled", or, when it was never inserted, it is answered -32800)."""
    session_id = _ready_session(agent, cfg)
    pending = _start_long(agent, session_id, cfg)
    agent.checker.expect_cancelled(pending.id)
    sent = time.monotonic()
    agent.cancel(session_id)
    answer = _answer(agent, pending, cfg, "the cancelled prompt")
    refused = _cancelled_before_insertion(pending, answer)
    if refused is not None and refused.get("code") == REQUEST_CANCELLED:
        return f"cancelled before its insertion (v2): answered {_brief(refused, 120)}"
    if _stop_reason(answer) != "cancelled":
        raise CheckFailed(f"cancelled prompt answered {_brief(answer)}", _exchange(agent, pending))
    return f"cancelled after {time.monotonic() - sent:.3f}s" + (" (idle state_update)" if isinstance(pending, Turn) else "")


def check_cancel_same_write(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S11: a cancel in the same write as the prompt cancels that prompt (v2: or the prompt, cancelled
    before its insertion, is answered -32800; refused with another error, nothing was cancelled)."""
    session_id = _ready_session(agent, cfg)
    message = agent.make_request("session/prompt", agent.prompt_params(session_id, cfg.long_prompt))
    agent.send(message, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    pending = agent.pending_for(message)
    answer = _answer(agent, pending, cfg, "the prompt cancelled in the same write")
    refused = _cancelled_before_insertion(pending, answer)
    if refused is not None and refused.get("code") == REQUEST_CANCELLED:
        return f"cancelled before its insertion (v2): answered {_brief(refused, 120)}"
    if refused is not None:
        raise CheckSkipped(f"not exercised: the prompt was refused before its insertion ({_brief(refused, 120)}); nothing "
                           "was cancelled", wire=_exchange(agent, pending))
    if _stop_reason(answer) != "cancelled":
        # Only a prompt that cannot end by itself must answer cancelled: make sure this one cannot.
        running = _start_long(agent, session_id, cfg)
        agent.checker.expect_cancelled(running.id)
        agent.cancel(session_id)
        _answer(agent, running, cfg, "the long prompt after cancel")
        raise CheckFailed(f"answered {_brief(answer)}", _exchange(agent, agent.pending_for(message)))
    return "answered cancelled"


def check_second_prompt(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """acp_green's own advice (S8; ACP implies one turn at a time but defines no error for an overlapping
    prompt): a second prompt on a busy session is refused at once (-32000); the first is unaffected.

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
        late = _answer(agent, second, cfg, "the second prompt", login_check=False)
        raise CheckFailed(f"queued: the second prompt got no answer while the first ran ({cfg.timeout:g}s); after "
                          f"session/cancel the first answered {_brief(first_answer, 80)}, then the second {_brief(late, 80)}",
                          _exchange(agent, first, second))
    if first.done and not (second.done and _answered_at(second) <= _answered_at(first)):
        first_answer = first.response(0)
        later = _answer(agent, second, cfg, "the second prompt", login_check=False)
        raise CheckFailed(f"the first prompt answered {_brief(first_answer, 80)} once the second arrived, then the "
                          f"second answered {_brief(later, 80)}", _exchange(agent, first, second))
    answer = second.response(0)
    error = answer.get("error")
    if error is None:
        agent.cancel(session_id)
        _answer(agent, first, cfg, "the first prompt after cancel")
        raise CheckFailed(f"ran alongside: the second prompt answered {_brief(answer, 80)} while the first still ran",
                          _exchange(agent, first, second))
    agent.cancel(session_id)
    first_answer = _answer(agent, first, cfg, "the first prompt after cancel")
    if not isinstance(error, dict) or error.get("code") != SERVER_BUSY:
        raise CheckFailed(f"refused with {_brief(error, 100)} while the first ran (expected -32000)", _exchange(agent, first, second))
    if _stop_reason(first_answer) != "cancelled":
        raise CheckFailed(f"first prompt answered {_brief(first_answer)} after cancel", _exchange(agent, first, second))
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
    controls = [("session/new", _session_params(cfg))]
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
                raise CheckFailed(f"{method} during the prompt failed: {_brief(answer)}", _exchange(agent, pending))
            overtaken = prompt.done and prompt.answered_at is not None and pending.answered_at is not None \
                and prompt.answered_at < pending.answered_at
            if not overtaken:
                break
            if not streaming:
                raise CheckFailed(f"{method} was answered only after the running prompt finished "
                                  f"({len(agent.updates(session_id))} updates)", _exchange(agent, prompt, pending))
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
            raise CheckFailed(f"prompt on one of {cfg.sessions} sessions failed: {_brief(answer)}",
                              _exchange(agent, agent.pending_for(message)))
        reason = str(_stop_reason(answer))
        reasons[reason] = reasons.get(reason, 0) + 1
    return f"{cfg.sessions} sessions, {cfg.sessions} prompts in one write: " + ", ".join(f"{n} {r}" for r, n in reasons.items())


def check_exit_on_eof(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """acp_green's own advice: an idle agent exits (code 0) when its stdin closes; nothing it started
    is alive once the settle window passed (ACP's shutdown is the client's: close stdin, terminate)."""
    _ready(agent, cfg)
    closed = time.monotonic()
    result = agent.finish()
    took = time.monotonic() - closed
    bad = [v for v in result.violations if v.invariant in ("exit_after_eof", "no_orphan_processes")]
    if bad:
        raise CheckFailed(str(bad[0]).splitlines()[0], agent.records[-1:])
    if result.exit_code != 0:
        raise CheckFailed(f"exited with code {result.exit_code} after EOF", agent.records[-1:])
    return f"exit 0 after {took:.2f}s"


def check_tool_prompt(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """The tool prompt is answered; what it sends (paths, tool calls) is judged by the invariant rows.

    A prompt that used no tool, or that the agent refused, exercised nothing: the row says so (a
    skip), not that it passed or failed."""
    session_id = _ready_session(agent, cfg)
    text = cfg.tool_prompt.replace("{file}", cfg.offered_file)
    pending = agent.prompt(session_id, text)
    answer = _answer(agent, pending, cfg, "the tool prompt")
    if "error" in answer:  # an agent may refuse a prompt it cannot do: ACP allows it, and nothing was exercised
        raise CheckSkipped(f"not exercised: the agent answered the prompt {text!r} with an error: "
                           f"{_brief(answer['error'], 120)}", needs="--tool-prompt")
    tools = [u for u in agent.updates(session_id) if u.get("sessionUpdate") == "tool_call"]
    asked = sorted({r["method"] for r in agent.agent_requests})
    if not tools and not asked:
        raise CheckSkipped(f"not exercised: the prompt {text!r} answered {_stop_reason(answer)!r} without using a tool",
                           needs="--tool-prompt")
    return f"{_stop_reason(answer)}; {len(tools)} tool call(s)" + (f", asked the client: {', '.join(asked)}" if asked else "")


def check_answers_at_eof(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """acp_green's own advice (S13): a prompt still running when stdin closes is answered (cancelled) before the agent exits."""
    session_id = _ready_session(agent, cfg)
    pending = _start_long(agent, session_id, cfg)
    agent.answers_owed_at_eof = False  # judged here, as acp_green's own advice, not again as a broken MUST
    result = agent.finish()
    if result.killed:
        raise CheckSkipped("not exercised: the agent did not exit after EOF (see exit on EOF)")
    if not pending.done and isinstance(pending, Turn):
        raise CheckFailed(f"the turn running at EOF (acknowledged: {pending.ack is not None}) got no idle state_update "
                          f"before the agent exited (code {result.exit_code})", _exchange(agent, pending))
    if not pending.done:
        raise CheckFailed(f"the prompt running at EOF got no answer before the agent exited (code {result.exit_code})",
                          _exchange(agent, pending))
    if isinstance(pending, Turn):
        return f"the running turn ended {_stop_reason(pending.response(0))} (idle state_update) before exit {result.exit_code}"
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
    """acp_green's own advice: SIGHUP (the editor's terminal closed) ends the agent the way SIGTERM does."""
    on_term = _signal_outcome(agent, cfg, signals.SIGTERM)
    other = _launch(cfg)
    try:
        on_hup = _signal_outcome(other, cfg, signals.SIGHUP)
    finally:
        _absorb(agent, other)
    if on_hup != on_term:
        raise CheckFailed(f"SIGTERM: {on_term}; SIGHUP: {on_hup}", other.records[-2:])
    return f"both: {on_term}"


# -- under --protocol 2 (the v2 draft) ----------------------------------------------------------
BATCH_REFUSERS = ("the v2 draft's own TypeScript SDK (2.4.0) and codex-acp 2.6.0 refuse batches too: -32600 "
                  "\"JSON-RPC batches are not supported\"")


def check_version_v2(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize with 2 answers 2; with an unknown future version, the agent's latest (2 or later, below 999)."""
    pending = agent.request("initialize", _initialize_params(agent, 2))
    answer = _answer(agent, pending, cfg, "initialize(v2)", login_check=False)
    got_v2 = answer["result"].get("protocolVersion") if isinstance(answer.get("result"), dict) else None
    if got_v2 != 2:
        raise CheckFailed(f"initialize(protocolVersion=2) answered {_brief(answer.get('error', got_v2), 100)}",
                          _exchange(agent, pending))
    other = _launch(cfg)
    try:
        ask = other.request("initialize", {**_initialize_params(other, 2), "protocolVersion": 999})
        future = _answer(other, ask, cfg, "initialize(v999)", login_check=False)
        wire = _exchange(other, ask)
    finally:
        _absorb(agent, other)
    got = future.get("result", {}).get("protocolVersion") if isinstance(future.get("result"), dict) else None
    if not isinstance(got, int) or isinstance(got, bool) or not 2 <= got < 999:
        raise CheckFailed(f"initialize(protocolVersion=999) answered {_brief(future.get('error', got), 100)}; expected the "
                          "agent's latest supported version (2 or later)", wire)
    return f"v2 -> 2; v999 -> {got} (validated against the v2 draft schema)"


def check_tool_prompt_v2(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """The tool prompt's turn ends; v2 has no client fs or terminals, so only the agent's own tools can be used."""
    session_id = _ready_session(agent, cfg)
    text = cfg.tool_prompt.replace("{file}", cfg.offered_file)
    answer = _answer(agent, agent.prompt(session_id, text), cfg, "the tool prompt")
    tools = [u for u in agent.updates(session_id) if u.get("sessionUpdate") in ("tool_call", "tool_call_update")]
    if "error" in answer or not tools:
        ended = _brief(answer["error"], 120) if "error" in answer else repr(_stop_reason(answer))
        raise CheckSkipped(f"not exercised: ACP v2 has no client fs or terminals, and the prompt {text!r} ended {ended} "
                           "without a tool of the agent's own", needs="--tool-prompt")
    return f"{_stop_reason(answer)}; {len({u.get('toolCallId') for u in tools})} tool call(s) of the agent's own"


def check_batch_v2(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Advisory: a batch of two requests is answered as one array holding both answers (v2 has batches)."""
    _ready(agent, cfg)
    requests = [agent.make_request(f"{PROBE_METHOD_PREFIX}ping", {}) for _ in range(2)]
    start = len(agent.records)
    agent.checker.allow_null_answer()  # a batch refused as a whole is this advisory row's finding, not a MUST's
    agent.send_batch(*requests)
    pendings = [agent.pending_for(m) for m in requests]
    refusal = lambda: next((r for r in agent.records[start:] if r.direction == "in" and isinstance(r.message, dict)  # noqa: E731
                            and "error" in r.message and r.message.get("id") is None), None)
    try:
        agent.wait_for(lambda: all(p.done for p in pendings) or refusal(), cfg.timeout, "the batch's answers")
    except AssertionError:
        agent.checker.gave_up(requests[0]["id"], cfg.timeout)
        raise CheckFailed(f"no answer to a batch of two requests within {cfg.timeout:g}s; {BATCH_REFUSERS}",
                          agent.records[start:start + 3]) from None
    refused = refusal()
    if refused is not None and not all(p.done for p in pendings):
        raise CheckFailed(f"the batch was refused: {_brief(refused.message.get('error'), 120)}; {BATCH_REFUSERS}",
                          [agent.records[start], refused])
    keys = {id_key(m["id"]) for m in requests}
    arrays = [r for r in agent.records[start:] if r.direction == "in" and isinstance(r.message, list)
              and keys <= {id_key(a.get("id")) for a in r.message if isinstance(a, dict)}]
    if not arrays:
        raise CheckFailed("both requests were answered, but not as one array (JSON-RPC: a batch's answers come as one "
                          f"array); {BATCH_REFUSERS}", [agent.records[start], *_exchange(agent, *pendings)[2:]])
    return f"answered as one array of {len(arrays[0].message)}"


def check_resume_replay_v2(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """v2's session/resume (no session/load) with replayFrom {type: start} after a turn: answered, and a
    replayed user message keeps the messageId its prompt was answered with (v2 lets an agent keep none)."""
    session_id = _ready_session(agent, cfg)
    turn = agent.prompt(session_id, "hello")
    answer = _answer(agent, turn, cfg, "a prompt before the resume")
    if "error" in answer:
        raise CheckFailed(f"the prompt before the resume failed: {_brief(answer)}", _exchange(agent, turn))
    acked = turn.ack.message.get("result") if isinstance(turn, Turn) and turn.ack is not None else None
    message_id = acked.get("messageId") if isinstance(acked, dict) else None
    start = len(agent.records)
    resume = agent.request("session/resume", {"sessionId": session_id, "cwd": _session_params(cfg)["cwd"],
                                              "replayFrom": {"type": "start"}})
    _result(agent, resume, cfg, "session/resume")
    assert resume.answered_at is not None
    replayed = [(r, r.message["params"]["update"]) for r in agent.records[start:]
                if r.direction == "in" and r.t <= resume.answered_at and isinstance(r.message, dict)
                and r.message.get("method") == "session/update" and isinstance(r.message.get("params"), dict)
                and r.message["params"].get("sessionId") == session_id and isinstance(r.message["params"].get("update"), dict)]
    users = [(r, u) for r, u in replayed if u.get("sessionUpdate") in ("user_message", "user_message_chunk")]
    if not users:
        raise CheckSkipped(f"not exercised: session/resume answered after {len(replayed)} update(s), no user message "
                           "replayed (v2 lets an agent keep none)")
    if not any(u.get("messageId") == message_id for _, u in users):
        raise CheckFailed(f"the replayed user message carries messageId {_brief(users[0][1].get('messageId'), 60)}, not "
                          f"{_brief(message_id, 60)}, the one its prompt was answered with",
                          _exchange(agent, turn)[:2] + [users[0][0]])
    return f"{len(replayed)} update(s) replayed; the user message kept its messageId {message_id}"


# (row name, check, needs a session); each row's force and the rule it cites are probe_rules.py's.
_CHECKS: tuple[tuple[str, Callable[[CheckedAgent, ProbeConfig], str], bool], ...] = (
    ("version negotiation", check_version, False),
    ("ids echoed", check_ids_echoed, False),
    ("notifications unanswered", check_notifications, False),
    ("-32700 for garbage", check_parse_error, False),
    ("initialize+session/new in one write", check_init_and_new_one_write, True),
    ("cancel during a long prompt", check_cancel_long, True),
    ("cancel in the same write as the prompt", check_cancel_same_write, True),
    ("second prompt on a busy session", check_second_prompt, True),
    ("control during a streaming prompt", check_control_while_streaming, True),
    ("many sessions at once", check_many_sessions, True),
    ("a prompt that uses a tool", check_tool_prompt, True),
    ("exit on EOF", check_exit_on_eof, False),
    ("running prompt answered at EOF", check_answers_at_eof, True),
    ("SIGHUP handled like SIGTERM", check_sighup, False),
    ("unknown session answered -32002", check_unknown_session, True),
)
# (row name, check, needs a session, force)
CHECKS: tuple[tuple[str, Callable[[CheckedAgent, ProbeConfig], str], bool, str], ...] = tuple(
    (name, check, needs, rule_for(name).force) for name, check, needs in _CHECKS)

# What --protocol 2 runs instead of a row of CHECKS, and its rows of its own (after the others).
V2_CHECKS: dict[str, Callable[[CheckedAgent, ProbeConfig], str]] = {
    "version negotiation": check_version_v2,
    "a prompt that uses a tool": check_tool_prompt_v2,
}
V2_ONLY_CHECKS: tuple[tuple[str, Callable[[CheckedAgent, ProbeConfig], str], bool, str], ...] = tuple(
    (name, check, needs, rule_for(name).force) for name, check, needs in (
        ("session/resume replays from start", check_resume_replay_v2, True),
        ("batch answered as one array", check_batch_v2, False),
    ))


def checks_for(version: int) -> tuple[tuple[str, Callable[[CheckedAgent, ProbeConfig], str], bool, str], ...]:
    """The rows a probe asking for `version` runs: CHECKS, under v2 adapted and with v2's own rows."""
    if version != 2:
        return CHECKS
    return tuple((name, V2_CHECKS.get(name, check), needs, force) for name, check, needs, force in CHECKS) + V2_ONLY_CHECKS


# Invariant rows: what every run above was checked for, named as in the table, what a row with
# nothing to check says, and the option that would give it something to check (a key of NEEDS).
_INVARIANT_ROWS = {
    "valid_json_rpc": ("stdout hygiene (every line JSON-RPC)", "the agent wrote nothing", ""),
    "schema": ("strict schema validity", "the agent wrote nothing", ""),
    "one_response_per_request": ("one response per request", "no request was sent", ""),
    "no_response_to_notification": ("no response to a notification", "no notification was sent", ""),
    "prompt_updates_in_order": ("prompt updates in order", "no prompt was answered in the demo's /stream grammar "
                                "(indexed chunks)", "--stream-prompt"),
    "no_update_after_response": ("no update after the prompt response", "no prompt was answered", ""),
    "cancelled_answers_cancelled": ("cancelled prompt answers cancelled", "no prompt was cancelled while it ran", "--long-prompt"),
    "exit_after_eof": ("process exits after stdin closes", "no run ended", ""),
    "no_orphan_processes": ("no descendant survives", "the agent never exited by itself", ""),
    "absolute_paths": ("file paths sent to the client are absolute", "the agent sent no file path", "--tool-prompt"),
    "capabilities_respected": ("only what the client advertised (boolean options)", "the agent sent no config options to a v1 client", ""),
    "tool_calls_finished": ("tool calls finish before the prompt response", "the agent reported no tool call", "--tool-prompt"),
    "message_id_consistent": ("messageId consistent within a message", "no chunk carried a messageId", ""),
    "unknown_method_not_found": ("unknown method answered -32601", "no request for an unknown method was answered", ""),
}
#: Rules of ACP v1 that v2 dropped: a probe asking for v2 shows them only when a v1 run checked them.
V1_ONLY_INVARIANTS = frozenset({"capabilities_respected"})
#: The rows that judge the agent's process (its exit at EOF, its signals, what it started): a remote
#: agent (a URL) has none the probe can see, so they are skipped saying so (REMOTE_SKIP).
PROCESS_ROWS = frozenset({"exit on EOF", "running prompt answered at EOF", "SIGHUP handled like SIGTERM"})
PROCESS_INVARIANTS = frozenset({"exit_after_eof", "no_orphan_processes"})
REMOTE_SKIP = ("the agent is reached at a URL: no process of it runs here whose exit, signals or descendants the probe "
               "could watch (each check ends its connection instead: a close frame, or a DELETE)")
AUTH_ROW = "authentication"
VERSION_ROW = "protocol version"
SESSION_ROW = "session and first prompt"
#: Invariants the checker counts as broken rules whose rows here are not ACP's MUSTs (probe_rules.py:
#: acp_green's own advice): what they find is a warning of the probe, never a failure.
NOT_MUST_INVARIANTS = frozenset(invariant for invariant, (title, *_) in _INVARIANT_ROWS.items()
                                if invariant not in ADVISORIES and rule_for(title).force != MUST)


def _isolated(cfg: ProbeConfig) -> tuple[ProbeConfig, list[str]]:
    """The config the agents run with, and the directories to remove afterwards: a per-run
    workspace (each session's cwd, holding the offered file) and, unless keep_env, a fresh
    XDG_STATE_HOME."""
    workspace = tempfile.mkdtemp(prefix="acp-green-probe-")  # a remote agent on another machine reads it through fs/*
    os.chmod(workspace, 0o755)  # an agent run as another user (runuser) must still reach its cwd and the file
    with open(os.path.join(workspace, PROBE_FILE_NAME), "w", encoding="utf-8") as handle:
        handle.write(PROBE_FILE_TEXT)
    cfg = replace(cfg, workspace=workspace)
    if cfg.keep_env or cfg.remote:  # a remote agent's environment is not ours to set
        return cfg, [workspace]
    state = tempfile.mkdtemp(prefix="acp-green-probe-state-")
    return replace(cfg, env={**(os.environ if cfg.env is None else cfg.env), "XDG_STATE_HOME": state}), [workspace, state]


def _wire(records: Sequence[Record], limit: int = 300) -> list[str]:
    return [render(record, limit) for record in records]


def _take_run(report: ProbeReport, result: RunResult, run: str) -> None:
    """What a run found, into the report: the broken MUSTs as violations, the rest as warnings."""
    found = _in_run(result.violations, run)
    report.violations.extend(v for v in found if v.invariant not in NOT_MUST_INVARIANTS)
    report.warnings.extend(v for v in found if v.invariant in NOT_MUST_INVARIANTS)
    report.warnings.extend(result.advisories)


def _in_run(violations: Sequence[Violation], run: str) -> list[Violation]:
    """Violations no message proves (an exit, an orphan) name the run they were seen in."""
    return [v if v.messages else Violation(v.invariant, f"{v.detail} (in the run of {run!r})", v.messages) for v in violations]


def _auth_row(cfg: ProbeConfig, exc: CheckSkipped) -> CheckResult:
    """The one row that says the agent needs a login: where it said so, in its words, and its authMethods."""
    offered = f"authMethods: {', '.join(cfg.auth_methods)}" if cfg.auth_methods else "no authMethods advertised"
    how = f"authenticate({cfg.authenticate}) did not help" if cfg.authenticate else "run with --authenticate METHOD_ID"
    if cfg.ask == 2:  # v2 logs in with auth/login, which the probe does not drive
        how = "under v2 the probe calls no login method: log the agent in with its own command first"
    return CheckResult(AUTH_ROW, SKIP, f"needs authentication: {exc}; {offered}; the rows that need a session or a prompt "
                                       f"are skipped ({how})", wire=_wire(exc.wire))


def _first_session_refused(agent: CheckedAgent, cfg: ProbeConfig) -> CheckResult | None:
    """session/new and a first prompt ("hello"); the row to show when either is answered with an error.

    An agent may answer any request with an error (its backend did not start, it has no model):
    ACP allows it, and then no row that needs a session can be graded. Said once, not as a
    failure in every row. A login refusal raises NeedsAuthentication instead."""
    pending = agent.request("session/new", _session_params(cfg))
    answer = _answer(agent, pending, cfg, "session/new")
    result = answer.get("result")
    if "error" not in answer and isinstance(result, dict) and isinstance(result.get("sessionId"), str):
        pending = agent.prompt(result["sessionId"], "hello")
        answer = _answer(agent, pending, cfg, "a first prompt")
    if "error" not in answer:
        return None
    return CheckResult(SESSION_ROW, SKIP, f"{pending.method} answered {_brief(answer['error'], 200)}: the rows that need a "
                                          "session are skipped (an error answer breaks no rule; nothing could be graded)",
                       wire=_wire(_exchange(agent, pending)))


def _preflight(cfg: ProbeConfig, report: ProbeReport) -> tuple[ProbeConfig, list[CheckResult]]:
    """One run before the checks: the version the agent answers to initialize(protocolVersion=1),
    its authMethods, and whether it needs a login (-32000 on session/new or on a first prompt).

    Returns the config the checks run with and the rows to show (a login row, a version row)."""
    agent = _launch(cfg)
    rows: list[CheckResult] = []
    try:
        if cfg.ask == 2:
            return _preflight_v2(agent, cfg, rows)
        pending = agent.request("initialize", _initialize_params(agent, 1))
        answer = _answer(agent, pending, cfg, "initialize(v1)", login_check=False)
        result = answer["result"] if isinstance(answer.get("result"), dict) else {}
        error = answer.get("error")
        protocol = 2 if isinstance(error, dict) and error.get("code") == UNSUPPORTED_VERSION else result.get("protocolVersion", 1)
        methods = tuple(str(m.get("id")) for m in result.get("authMethods") or [] if isinstance(m, dict))
        cfg = replace(cfg, protocol=protocol, auth_methods=methods)
        if protocol != 1:
            why = ("the agent speaks only the ACP v2 draft: this check drives ACP v1 sessions and prompt turns, which the "
                   "probe does not grade in v2" if protocol == 2 else
                   f"initialize(protocolVersion=1) answered protocolVersion {json.dumps(protocol)}: no session is opened")
            rows.append(CheckResult(VERSION_ROW, SKIP, why + "; graded: the version, ids, notifications, -32700 and "
                                    "exit rows, and the invariants" + (" (against the v2 draft schema; probe with --protocol 2 to grade its v2 "
                                    "sessions and turns)" if protocol == 2 else ""),
                                    wire=_wire(_exchange(agent, pending))))
            return replace(cfg, sessionless=True, why_sessionless=why), rows
        if cfg.authenticate is not None:
            _result(agent, agent.request("authenticate", {"methodId": cfg.authenticate}), cfg, f"authenticate({cfg.authenticate})")
        refused = _first_session_refused(agent, cfg)
        if refused is not None:
            rows.append(refused)
            return replace(cfg, sessionless=True, why_sessionless=f"no session could be opened and prompted (see the {SESSION_ROW} "
                                                                   "row)"), rows
        if cfg.authenticate is not None:
            rows.append(CheckResult(AUTH_ROW, PASS, f"authenticate({cfg.authenticate}), then session/new and a prompt succeeded"))
    except NeedsAuthentication as exc:
        rows.append(_auth_row(cfg, exc))
        cfg = replace(cfg, sessionless=True, why_sessionless="needs authentication (see the authentication row)")
    except Exception as exc:  # the checks below say what is wrong, one by one
        if cfg.authenticate is not None:
            wire = _wire(exc.wire) if isinstance(exc, CheckFailed) else _wire(agent.records[-2:])
            rows.append(CheckResult(AUTH_ROW, FAIL, str(exc) if isinstance(exc, CheckFailed) else f"{type(exc).__name__}: {exc}",
                                    wire=wire))
    finally:
        _take_run(report, agent.finish(), "initialize, session/new and a first prompt")
    return cfg, rows


def _preflight_v2(agent: CheckedAgent, cfg: ProbeConfig, rows: list[CheckResult]) -> tuple[ProbeConfig, list[CheckResult]]:
    """--protocol 2: initialize(protocolVersion=2); an agent that answers otherwise does not serve v2
    (one row says so and nothing else runs: cfg.protocol tells). Then a login or a refused session."""
    pending = agent.request("initialize", _initialize_params(agent, 2))
    answer = _answer(agent, pending, cfg, "initialize(v2)", login_check=False)
    result = answer["result"] if isinstance(answer.get("result"), dict) else {}
    protocol = result.get("protocolVersion") if "error" not in answer else None
    if protocol != 2:
        said = f"it answered {json.dumps(protocol)}" if "error" not in answer else f"it answered {_brief(answer['error'], 120)}"
        rows.append(CheckResult(VERSION_ROW, SKIP, f"the agent does not serve v2: {said} to initialize(protocolVersion=2); "
                                "nothing else was probed (probe it without --protocol 2 to grade ACP v1)",
                                wire=_wire(_exchange(agent, pending))))
        return replace(cfg, protocol=protocol), rows
    methods = tuple(str(m.get("methodId", m.get("id"))) for m in result.get("authMethods") or [] if isinstance(m, dict))  # v2: methodId
    cfg = replace(cfg, auth_methods=methods)
    try:
        refused = _first_session_refused(agent, cfg)
    except NeedsAuthentication as exc:  # here, where cfg knows the agent's authMethods
        rows.append(_auth_row(cfg, exc))
        return replace(cfg, sessionless=True, why_sessionless="needs authentication (see the authentication row)"), rows
    if refused is not None:
        rows.append(refused)
        return replace(cfg, sessionless=True, why_sessionless=f"no session could be opened and prompted (see the {SESSION_ROW} "
                                                               "row)"), rows
    return cfg, rows


def run_probe(cfg: ProbeConfig, progress: Callable[[CheckResult], None] | None = None,
              only: Sequence[str] = ()) -> ProbeReport:
    """Run every check (or those whose names contain one of `only`) and the invariant rows."""
    cfg, made = _isolated(cfg)
    try:
        return _run(cfg, progress or (lambda row: None), only)
    finally:
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)


def _run_check(cfg: ProbeConfig, name: str, check: Callable[[CheckedAgent, ProbeConfig], str], force: str,
               report: ProbeReport) -> tuple[CheckResult, CheckedAgent, RunResult]:
    """One check in a fresh agent process: its row, the agent and how its run ended."""
    bad = FAIL if force == MUST else WARN
    agent = _launch(cfg)
    try:
        row = CheckResult(name, PASS, check(agent, cfg), force)
    except CheckFailed as exc:
        row = CheckResult(name, bad, str(exc), force, _wire(exc.wire))
    except NeedsAuthentication as exc:
        if not any(r.check == AUTH_ROW for r in report.results):
            report.add(_auth_row(cfg, exc))
        row = CheckResult(name, SKIP, "skipped: needs authentication (see the authentication row)", force)
    except CheckSkipped as exc:
        row = CheckResult(name, SKIP, str(exc), force, _wire(exc.wire), exc.needs)
    except Exception as exc:  # the agent crashed, closed its stdout, answered nonsense...
        row = CheckResult(name, bad, f"{type(exc).__name__}: {exc}", force)
    finally:
        result = agent.finish()
    # An exit the agent chose after EOF (one the probe caused, a kill or a signal, has its own row):
    # a code other than 0 is acp_green's own advice, not the row's rule, so it goes to the exit row.
    if result.exit_code not in (0, None) and name != "exit on EOF" and result.ended_by == "eof" and not result.killed:
        report.warnings.append(Violation("exit_after_eof", f"the agent exited with code {result.exit_code} after its "
                                         f"stdin closed (in the run of {name!r})"))
    if row.verdict in (FAIL, WARN) and not row.wire:  # every failing row quotes the wire: here, how the run ended
        ended = (f"(the probe ended the connection; the link says: {result.stderr_tail[-300:]!r})" if cfg.remote else
                 f"(the probe closed stdin; exit code {result.exit_code}; stderr ends: {result.stderr_tail[-200:]!r})")
        row.wire = _wire(agent.records[-2:]) + [ended]
    return row, agent, result


def _run(cfg: ProbeConfig, progress: Callable[[CheckResult], None], only: Sequence[str]) -> ProbeReport:
    report = ProbeReport(shown_command(cfg.command), offered_file=cfg.offered_file, protocol=cfg.ask)
    exercised: dict[str, int] = {}
    schema_notes: list[str] = []
    runs = 0
    try:
        cfg, first_rows = _preflight(replace(cfg, protocol=cfg.ask), report)
    except OSError as exc:
        if cfg.remote:
            report.add(CheckResult("start", FAIL, f"cannot reach {shown_command(cfg.command)[0]!r}: {exc.strerror or exc}",
                                   wire=[f"(connecting failed: {exc.strerror or exc})"]))
            return report
        report.add(CheckResult("start", FAIL, f"cannot start {cfg.command[0]!r}: {exc}", wire=[f"(exec failed: {exc})"]))
        return report
    for row in first_rows:
        report.add(row)
        progress(row)
    if cfg.ask == 2 and cfg.protocol != 2:
        return report  # the agent does not serve v2: its one row says so
    for name, check, needs_session, force in checks_for(cfg.ask):
        if only and not any(o in name for o in only):
            continue
        if needs_session and cfg.sessionless:
            row = CheckResult(name, SKIP, f"skipped: {cfg.why_sessionless}", force)
            report.add(row)
            progress(row)
            continue
        if cfg.remote and name in PROCESS_ROWS:
            row = CheckResult(name, SKIP, f"skipped: {REMOTE_SKIP}", force)
            report.add(row)
            progress(row)
            continue
        had_auth_row = any(r.check == AUTH_ROW for r in report.results)
        try:
            row, agent, result = _run_check(cfg, name, check, force, report)
        except OSError as exc:  # a remote agent that could be reached before, and no longer can
            row = CheckResult(name, FAIL if force == MUST else WARN, f"cannot reach the agent: {exc.strerror or exc}", force,
                              [f"(connecting failed: {exc.strerror or exc})"])
            report.add(row)
            progress(row)
            continue
        runs += 1
        if not had_auth_row and any(r.check == AUTH_ROW for r in report.results):
            progress(next(r for r in report.results if r.check == AUTH_ROW))
            cfg = replace(cfg, sessionless=True, why_sessionless="needs authentication (see the authentication row)")
        _take_run(report, result, name)
        schema_notes += [n for n in dict.fromkeys(agent.checker.schema_notes) if n not in schema_notes]
        for key, count in result.exercised.items():
            exercised[key] = exercised.get(key, 0) + count
        report.add(row)
        progress(row)
    for invariant in (*INVARIANTS, *ADVISORIES):
        if cfg.ask == 2 and invariant in V1_ONLY_INVARIANTS and not exercised.get(invariant):
            continue  # a v1 rule no run negotiating v1 could check: no row rather than a skip that misleads
        row = _invariant_row(invariant, report, exercised, runs, schema_notes if invariant == "schema" else [])
        if cfg.remote and invariant in PROCESS_INVARIANTS and row.verdict == SKIP:
            row = CheckResult(row.check, SKIP, f"skipped: {REMOTE_SKIP}", row.force)
        report.add(row)
        progress(row)
    return report


def _invariant_row(invariant: str, report: ProbeReport, exercised: dict[str, int], runs: int, notes: list[str]) -> CheckResult:
    """The row of one invariant over every run: the first violation (quoting its messages), or why nothing was checked.
    Its force is its rule's (probe_rules.py): a broken MUST fails, anything else warns."""
    title, idle, needs = _INVARIANT_ROWS[invariant]
    force = rule_for(title).force
    advisory = force != MUST
    broken = [v for v in (report.warnings if advisory else report.violations) if v.invariant == invariant]
    row: CheckResult
    if broken:
        first = broken[0]
        row = CheckResult(title, WARN if advisory else FAIL, f"{len(broken)} violation(s); first: {first.detail}",
                          wire=list(first.messages) or [f"(no message: what the process did) {first.detail}"])
    elif not runs:
        row = CheckResult(title, SKIP, "no check ran")
    elif not exercised.get(invariant):
        row = CheckResult(title, SKIP, f"not exercised: {idle}", needs=needs)
    else:
        row = CheckResult(title, PASS, f"held in all {runs} runs ({exercised[invariant]} checked)")
    if notes:
        row.evidence += "; " + "; ".join(notes)
    row.force = force
    return row


def _rows_table(rows: Sequence[CheckResult], width: int) -> list[str]:
    import textwrap

    name_w = max([len(r.check) for r in rows] + [10])
    lines = [f"{'check'.ljust(name_w)}  verdict  evidence", f"{'-' * name_w}  -------  {'-' * 40}"]
    for row in rows:
        evidence = f"needs {row.needs}: {row.evidence}" if row.needs and row.verdict == SKIP else row.evidence
        wrapped = textwrap.wrap(evidence, max(30, width - name_w - 11)) or [""]
        lines.append(f"{row.check.ljust(name_w)}  {row.verdict.upper().ljust(7)}  {wrapped[0]}")
        lines.extend(f"{'':{name_w}}  {'':7}  {more}" for more in wrapped[1:])
        if row.verdict in (FAIL, WARN):
            if row.basis:
                lines.extend(f"    {'rule:' if i == 0 else '     '} {more}"
                             for i, more in enumerate(textwrap.wrap(row.basis, max(30, width - 10))))
            lines.extend(f"    wire: {line if len(line) <= 2 * width else line[:2 * width - 3] + '...'}" for line in row.wire)
    return lines


def _needs_lines(report: ProbeReport) -> list[str]:
    """One line per option a skipped row needs, instead of saying it in every row."""
    counts: dict[str, int] = {}
    for row in [*report.results, *report.advisories]:
        if row.verdict == SKIP and row.needs:
            counts[row.needs] = counts.get(row.needs, 0) + 1
    return [f"{count} row(s) marked `needs {needs}` were not exercised for want of {NEEDS.get(needs, needs)}."
            for needs, count in counts.items()]


def format_table(report: ProbeReport, width: int = 100) -> str:
    """Plain-text tables: the MUST rows, then apart the advisory rows (what ACP says without a MUST)
    and the rows of acp_green's own advice; each wraps its evidence and, under a failing or warning
    row, cites its rule and quotes the wire; then what the skipped rows need, once."""
    lines = _rows_table(report.results, width)
    failed = sum(1 for r in report.results if r.verdict == FAIL)
    skipped = sum(1 for r in report.results if r.verdict == SKIP)
    for force, heading in ((ADVISORY, "advisory (never fails the probe): what ACP says without a MUST (a SHOULD, what it "
                                      "implies, a code it names)"),
                           (OWN, f"advisory (never fails the probe): {OWN_ADVICE}, beyond ACP")):
        rows = [r for r in report.advisories if r.force == force]
        if rows:
            lines += ["", heading, ""] + _rows_table(rows, width)
    warned = sum(1 for r in report.advisories if r.verdict == WARN)
    lines.append("")
    lines.extend(_needs_lines(report))
    if report.offered_file:
        lines.append(f"The file offered to the agent was {report.offered_file} (a per-run temporary directory, each "
                     "session's cwd; removed after the run).")
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

    if cfg.ask == 2 and cfg.authenticate is not None:
        raise click.UsageError("--authenticate calls ACP v1's `authenticate`, which v2 does not have; under --protocol 2 "
                               "log the agent in with its own command first")
    rows = checks_for(cfg.ask)
    unknown = [o for o in only if not any(o in name for name, *_ in rows)]
    if unknown:
        raise click.UsageError(f"no check matches {', '.join(map(repr, unknown))}; checks: {', '.join(n for n, *_ in rows)}")
    try:
        remote_target(cfg.command)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"probing {' '.join(shown_command(cfg.command))}", err=True)
    report = run_probe(cfg, progress, only)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        text = format_table(report) + "".join(f"\n\n{violation}" + (f"\n    (seen {count} times)" if count > 1 else "")
                                              for violation, count in distinct([*report.violations, *report.warnings])[:10])
        click.echo(shown(text, newlines=True))  # the agent's text in it is shown, never acted on (terminal_text.py)
    return 0 if report.ok else 1
