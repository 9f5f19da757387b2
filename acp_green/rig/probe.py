"""`acp-green probe`: conformance and concurrency checks against any stdio ACP agent.

Each check launches the agent afresh (so one failure cannot hide another), drives it from
outside, and reports a verdict with evidence. Every run also goes through the invariant
checker; the invariants are reported as checks of their own, naming the messages that broke
them. Nothing here knows which agent it talks to.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import gevent

from .client import Pending
from .invariants import INVARIANTS, Violation
from .run import CheckedAgent

__all__ = ["CheckResult", "ProbeConfig", "ProbeReport", "run_probe", "format_table"]

PASS, FAIL, SKIP = "pass", "fail", "skip"


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


@dataclass(slots=True)
class CheckResult:
    """One row of the report."""

    check: str
    verdict: str
    evidence: str


@dataclass
class ProbeReport:
    """All rows, plus every invariant violation seen in any run."""

    command: list[str]
    results: list[CheckResult] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.verdict != FAIL for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "ok": self.ok,
            "checks": [asdict(r) for r in self.results],
            "violations": [v.to_json() for v in self.violations],
        }


class CheckFailed(Exception):
    """A check's verdict is fail; the message is the evidence."""


class CheckSkipped(Exception):
    """The check cannot be made against this agent; the message says why."""


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


def _ready(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize + session/new; returns the session id."""
    _result(agent, agent.request("initialize", agent.initialize_params()), cfg, "initialize")
    return _new_session(agent, cfg)


def _new_session(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    result = _result(agent, agent.request("session/new", {"cwd": "/tmp", "mcpServers": []}), cfg, "session/new")
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        raise CheckFailed(f"session/new gave no sessionId: {result!r}")
    return result["sessionId"]


def _start_long(agent: CheckedAgent, session_id: str, cfg: ProbeConfig, text: str | None = None) -> Pending:
    """Send the long prompt and make sure it is still running `settle` seconds later."""
    pending = agent.prompt(session_id, text or cfg.long_prompt)
    gevent.sleep(cfg.settle)
    if pending.done:
        raise CheckSkipped(f"the long prompt {text or cfg.long_prompt!r} ended within {cfg.settle:g}s "
                           f"({_brief(pending.response(0))}); pass --long-prompt with one that runs until cancelled")
    return pending


def _stop_reason(message: dict[str, Any]) -> Any:
    result = message.get("result")
    return result.get("stopReason") if isinstance(result, dict) else None


def _brief(message: Any, limit: int = 160) -> str:
    text = json.dumps(message, separators=(",", ":"), default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the checks ------------------------------------------------------------------------------
def check_version(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """initialize with v1 echoes 1; with an unknown future version the agent answers its own latest."""
    result = _result(agent, agent.request("initialize", agent.initialize_params(version=1)), cfg, "initialize(v1)")
    if result.get("protocolVersion") != 1:
        raise CheckFailed(f"initialize(protocolVersion=1) answered protocolVersion {result.get('protocolVersion')!r}")
    other = CheckedAgent(cfg.command, env=cfg.env)
    try:
        future = _result(other, other.request("initialize", other.initialize_params(version=999)), cfg, "initialize(v999)")
    finally:
        other.exit_timeout = cfg.exit_timeout
        agent.checker.violations.extend(other.finish().violations)
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
        if code != -32601:
            raise CheckFailed(f"unknown method _acp_green_probe/unknown answered {_brief(answer)}, expected -32601")
        seen.append(repr(message["id"]))
    return f"echoed {', '.join(seen)}; unknown method -> -32601"


def check_notifications(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Notifications (session/cancel while idle, unknown, $/cancel_request) get no response."""
    session_id = _ready(agent, cfg)
    agent.check()
    before = agent.checker.responses
    agent.send(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}},
        {"jsonrpc": "2.0", "method": "_acp_green_probe/notice", "params": {}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 424242}},
    )
    sentinel = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    agent.send(sentinel)
    _result(agent, agent.pending_for(sentinel), cfg, "session/new after the notifications")
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
    _new_session(agent, cfg)
    return "-32700, id null; next request answered"


def check_init_and_new_one_write(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S2: initialize and session/new written together both succeed."""
    init = agent.make_request("initialize", agent.initialize_params())
    new = agent.make_request("session/new", {"cwd": "/tmp", "mcpServers": []})
    agent.send(init, new)
    _result(agent, agent.pending_for(init), cfg, "initialize")
    result = _result(agent, agent.pending_for(new), cfg, "session/new")
    # S2: a prompt written the moment the session/new response is read works.
    answer = _answer(agent, agent.prompt(result["sessionId"], "hello"), cfg, "a prompt right after session/new")
    if "error" in answer:
        raise CheckFailed(f"the prompt after session/new failed: {_brief(answer)}")
    return f"both answered in one write; prompt right after -> {_stop_reason(answer)}"


def check_cancel_long(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """A long prompt is cancelled by session/cancel and answers stopReason "cancelled"."""
    session_id = _ready(agent, cfg)
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
    session_id = _ready(agent, cfg)
    message = agent.make_request("session/prompt", agent.prompt_params(session_id, cfg.long_prompt))
    agent.checker.expect_cancelled(message["id"])
    agent.send(message, {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
    answer = _answer(agent, agent.pending_for(message), cfg, "the prompt cancelled in the same write")
    if _stop_reason(answer) != "cancelled":
        raise CheckFailed(f"answered {_brief(answer)}")
    return "answered cancelled"


def check_second_prompt(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S8: a second prompt on a busy session is refused at once (-32000); the first is unaffected."""
    session_id = _ready(agent, cfg)
    first = _start_long(agent, session_id, cfg)
    agent.checker.expect_cancelled(first.id)
    second = agent.prompt(session_id, "second")
    answer = _answer(agent, second, cfg, "the second prompt")
    if first.done:
        raise CheckFailed(f"the first prompt ended when the second arrived: {_brief(first.response(0))}")
    agent.cancel(session_id)
    first_answer = _answer(agent, first, cfg, "the first prompt after cancel")
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("code") != -32000:
        raise CheckFailed(f"second prompt answered {_brief(answer)} while the first was running (expected -32000)")
    if _stop_reason(first_answer) != "cancelled":
        raise CheckFailed(f"first prompt answered {_brief(first_answer)} after cancel")
    reason = (error.get("data") or {}).get("reason") if isinstance(error.get("data"), dict) else None
    return f"-32000 ({reason or 'no reason'}); first prompt then cancelled normally"


def check_control_while_streaming(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """S1/S10: set_mode and session/new are answered while a prompt streams."""
    init = _result(agent, agent.request("initialize", agent.initialize_params()), cfg, "initialize")
    del init
    new = _result(agent, agent.request("session/new", {"cwd": "/tmp", "mcpServers": []}), cfg, "session/new")
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
        notes.append(f"{method} in {pending.answered_at - pending.sent_at:.3f}s")
    if not prompt.done:
        agent.cancel(session_id)
    _answer(agent, prompt, cfg, "the streaming prompt")
    return "; ".join(notes) + " while the prompt ran"


def check_many_sessions(agent: CheckedAgent, cfg: ProbeConfig) -> str:
    """Many sessions, one prompt each at once: every prompt is answered, none fails."""
    _result(agent, agent.request("initialize", agent.initialize_params()), cfg, "initialize")
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


CHECKS: tuple[tuple[str, Callable[[CheckedAgent, ProbeConfig], str]], ...] = (
    ("version negotiation", check_version),
    ("ids echoed", check_ids_echoed),
    ("notifications unanswered", check_notifications),
    ("-32700 for garbage", check_parse_error),
    ("initialize+session/new in one write", check_init_and_new_one_write),
    ("cancel during a long prompt", check_cancel_long),
    ("cancel in the same write as the prompt", check_cancel_same_write),
    ("second prompt on a busy session", check_second_prompt),
    ("control during a streaming prompt", check_control_while_streaming),
    ("many sessions at once", check_many_sessions),
    ("exit on EOF", check_exit_on_eof),
)

# Invariant rows: what every run above was checked for, named as in the table.
_INVARIANT_ROWS = {
    "valid_json_rpc": "stdout hygiene (every line JSON-RPC)",
    "schema": "strict schema validity",
    "one_response_per_request": "one response per request",
    "no_response_to_notification": "no response to a notification",
    "prompt_updates_in_order": "prompt updates in order",
    "no_update_after_response": "no update after the prompt response",
    "cancelled_answers_cancelled": "cancelled prompt answers cancelled",
    "exit_after_eof": "process exits after stdin closes",
    "no_orphan_processes": "no descendant survives",
}


def run_probe(cfg: ProbeConfig, progress: Callable[[CheckResult], None] | None = None,
              only: Sequence[str] = ()) -> ProbeReport:
    """Run every check (or those whose names contain one of `only`) and the invariant rows."""
    report = ProbeReport(list(cfg.command))
    runs = 0
    for name, check in CHECKS:
        if only and not any(o in name for o in only):
            continue
        try:
            agent = CheckedAgent(cfg.command, env=cfg.env)
        except OSError as exc:
            report.results.append(CheckResult(name, FAIL, f"cannot start {cfg.command[0]!r}: {exc}"))
            break  # nothing else can run either
        agent.exit_timeout = cfg.exit_timeout
        runs += 1
        try:
            evidence = check(agent, cfg)
            row = CheckResult(name, PASS, evidence)
        except CheckFailed as exc:
            row = CheckResult(name, FAIL, str(exc))
        except CheckSkipped as exc:
            row = CheckResult(name, SKIP, str(exc))
        except Exception as exc:  # the agent crashed, closed its stdout, answered nonsense...
            row = CheckResult(name, FAIL, f"{type(exc).__name__}: {exc}")
        finally:
            result = agent.finish()
        report.violations.extend(result.violations)
        if row.verdict == PASS and result.exit_code not in (0, None) and name != "exit on EOF":
            row = CheckResult(name, FAIL, f"{row.evidence}; then the agent exited with code {result.exit_code}")
        report.results.append(row)
        if progress is not None:
            progress(row)
    for invariant in INVARIANTS:
        broken = [v for v in report.violations if v.invariant == invariant]
        if broken:
            first = broken[0]
            evidence = f"{len(broken)} violation(s); first: {first.detail}" + "".join(f" | {m[:110]}" for m in first.messages[:2])
            row = CheckResult(_INVARIANT_ROWS[invariant], FAIL, evidence)
        elif not runs:
            row = CheckResult(_INVARIANT_ROWS[invariant], SKIP, "no check ran")
        else:
            row = CheckResult(_INVARIANT_ROWS[invariant], PASS, f"held in all {runs} runs")
        report.results.append(row)
        if progress is not None:
            progress(row)
    return report


def format_table(report: ProbeReport, width: int = 100) -> str:
    """A plain-text table: check, verdict, evidence (wrapped)."""
    import textwrap

    name_w = max(len(r.check) for r in report.results) if report.results else 10
    lines = [f"{'check'.ljust(name_w)}  verdict  evidence", f"{'-' * name_w}  -------  {'-' * 40}"]
    for row in report.results:
        wrapped = textwrap.wrap(row.evidence, max(30, width - name_w - 11)) or [""]
        lines.append(f"{row.check.ljust(name_w)}  {row.verdict.upper().ljust(7)}  {wrapped[0]}")
        lines.extend(f"{'':{name_w}}  {'':7}  {more}" for more in wrapped[1:])
    failed = sum(1 for r in report.results if r.verdict == FAIL)
    skipped = sum(1 for r in report.results if r.verdict == SKIP)
    lines.append("")
    lines.append(f"{len(report.results)} checks: {len(report.results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)


def main(cfg: ProbeConfig, as_json: bool = False, only: Sequence[str] = ()) -> int:
    """The `acp-green probe` command: progress on stderr, the table or JSON on stdout; 1 on failure."""
    import click

    def progress(row: CheckResult) -> None:
        click.echo(f"  {row.verdict:<4}  {row.check}", err=True)

    unknown = [o for o in only if not any(o in name for name, _ in CHECKS)]
    if unknown:
        raise click.UsageError(f"no check matches {', '.join(map(repr, unknown))}; checks: {', '.join(n for n, _ in CHECKS)}")
    click.echo(f"probing {' '.join(cfg.command)}", err=True)
    report = run_probe(cfg, progress, only)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(format_table(report))
        for violation in report.violations[:10]:
            click.echo(f"\n{violation}")
    return 0 if report.ok else 1
