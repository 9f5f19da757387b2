"""`acp-green trace replay`: play the client side of a trace against an agent and say where the
agent's behaviour departs from the trace.

The client's lines are sent in their recorded order, each once the agent has sent what the
recorded client had seen before it: the answers it had, the agent requests it had, and the
number of updates of a running prompt of its session (so a `session/cancel` recorded after N
updates is sent after N updates). The agent's own requests are answered with what the trace's
client answered (matched by method and params); its new session ids stand for the recorded ones.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import INTERNAL_ERROR
from ...rpc.wire import id_key
from ..rig.client import AgentProcess, ClientPolicy, Pending
from .check import connections
from .read import Trace, WireEvent, visible

__all__ = ["Divergence", "ReplayReport", "Script", "Step", "replay", "script"]

STDERR_LINES = 10  # of the agent's stderr, shown when it diverged


@dataclass(frozen=True, slots=True)
class Divergence:
    """One place where the agent did not do what the trace shows."""

    line: int | None  # the line of the trace it concerns
    what: str


@dataclass(slots=True)
class ReplayReport:
    divergences: list[Divergence] = field(default_factory=list)
    sent: int = 0
    exit_code: int | None = None
    stderr_tail: list[str] = field(default_factory=list)  # the agent's last stderr lines

    @property
    def ok(self) -> bool:
        return not self.divergences


@dataclass(slots=True)
class Step:
    """One line the recorded client sent, and how much of the agent's side it had seen before."""

    event: WireEvent
    answered: int  # how many of the script's `answers` had come
    agent_requests: int  # how many of the script's `agent_requests` had come
    updates: tuple[str, int] | None = None  # (key of a running prompt of its session, updates of the session since)


@dataclass(slots=True)
class Script:
    """The recorded client's lines, and the agent's answers and requests in the order they came."""

    steps: list[Step] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)  # keys of the client's requests, in the order answered
    agent_requests: list[WireEvent] = field(default_factory=list)


def _key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


def script(events: Sequence[WireEvent], client: str = "client") -> Script:
    """The recorded client's lines with what each waited for."""
    found = Script()
    asked: set[str] = set()
    running: dict[str, tuple[str, int]] = {}  # session -> (prompt key, updates since it was sent)
    prompts: dict[str, str] = {}  # prompt key -> its session
    for event in events:
        if event.sender == client:
            session = event.session
            found.steps.append(Step(event, len(found.answers), len(found.agent_requests), running.get(session) if session else None))
            if event.kind == "request":
                asked.add(_key(event.id))
                if event.method == "session/prompt" and session is not None:
                    running[session] = (_key(event.id), 0)
                    prompts[_key(event.id)] = session
        elif event.kind == "response" and _key(event.id) in asked:
            asked.discard(_key(event.id))
            found.answers.append(_key(event.id))
            session = prompts.pop(_key(event.id), None)
            if session is not None and running.get(session, ("", 0))[0] == _key(event.id):
                del running[session]
        elif event.kind == "request":
            found.agent_requests.append(event)
        elif event.method == "session/update" and event.session in running:
            prompt, count = running[event.session]
            running[event.session] = (prompt, count + 1)
    return found


def map_sessions(value: Any, mapping: dict[str, str]) -> Any:
    """`value` with every `sessionId` member that `mapping` names replaced."""
    if isinstance(value, dict):
        return {k: (mapping.get(v, v) if k == "sessionId" and isinstance(v, str) else map_sessions(v, mapping))
                for k, v in value.items()}
    if isinstance(value, list):
        return [map_sessions(v, mapping) for v in value]
    return value


class Replayer:
    """One replay of one trace's client against one agent command."""

    def __init__(self, events: Sequence[WireEvent], command: Sequence[str], timeout: float, client: str = "client") -> None:
        self.events = list(events)
        self.client_name = client
        self.timeout = timeout
        self.report = ReplayReport()
        self.sessions: dict[str, str] = {}  # recorded session id -> the agent's
        self.responses = {_key(e.id): e for e in self.events if e.kind == "response" and e.sender != client}
        self.recorded_agent_requests = [e for e in self.events if e.kind == "request" and e.sender != client]
        self.matched: dict[int, Any] = {}  # line of a recorded agent request -> the id the agent now used
        self.answered_lines: set[int] = set()  # recorded agent requests whose recorded answer was sent
        self.unmatched_requests: list[dict[str, Any]] = []
        self.sent: dict[str, Pending] = {}  # key of a recorded client request -> the request as sent again
        self.updates: dict[Any, int] = {}  # the agent's session id -> session/update notifications so far
        self.updates_before: dict[str, int] = {}  # key of a prompt sent again -> its session's updates then
        self._answers_seen = 0  # of the script's answers, how many were waited for
        self._requests_seen = 0  # of the script's agent requests, how many were waited for
        # Every answer to the agent comes from the replay, set before the reader starts: the agent may ask at once.
        self.proc = AgentProcess(list(command), ClientPolicy(answer_all=lambda _client, request: self._agent_request(request)))
        self.proc.listeners.append(self._received)

    # -- the agent's side ----------------------------------------------------------------------
    def _received(self, message: dict[str, Any]) -> None:
        """Count each session's updates; a new session id the agent answered maps the recorded one (session/new, fork)."""
        if message.get("method") == "session/update":
            session = _session_of(message)
            self.updates[session] = self.updates.get(session, 0) + 1
        if "method" in message or not isinstance(message.get("result"), dict):
            return
        recorded = self.responses.get(_key(message.get("id")))
        old = recorded.message.get("result") if recorded is not None and isinstance(recorded.message, dict) else None
        new = message["result"].get("sessionId")
        if isinstance(old, dict) and isinstance(old.get("sessionId"), str) and isinstance(new, str):
            self.sessions.setdefault(old["sessionId"], new)

    def _agent_request(self, request: dict[str, Any]) -> None:
        """Match the agent's request to a recorded one (same method, same params if one has them)."""
        back = {new: old for old, new in self.sessions.items()}
        params = map_sessions(request.get("params"), back)
        same = [e for e in self.recorded_agent_requests if e.line not in self.matched and e.method == request.get("method")]
        found = next((e for e in same if e.params == params), same[0] if same else None)
        if found is None:
            self.unmatched_requests.append(request)
            self.proc.respond_error(request.get("id"), {"code": INTERNAL_ERROR, "message": "trace replay: the trace has no such request"})
            return
        self.matched[found.line] = request.get("id")

    # -- the client's side ----------------------------------------------------------------------
    def run(self) -> ReplayReport:
        try:
            played = script(self.events, self.client_name)
            for step in played.steps:
                self._prepare(played, step)
                try:
                    self._send(step)
                except (BrokenPipeError, ConnectionResetError):
                    self.report.divergences.append(Divergence(step.event.line, "the agent closed its input (or exited) before this line was sent"))
                    break
            self._settle()
            self.proc.close_input()
            self.report.exit_code = self._exit()
        finally:
            code = self.proc.close()
            if self.report.exit_code is None:
                self.report.exit_code = code
            self.report.stderr_tail = self.proc.stderr_text(0).splitlines()[-STDERR_LINES:]
        compare_answers(self)
        compare_sequences(self)
        self.report.divergences.sort(key=lambda d: (d.line is None, d.line or 0))  # in the trace's order
        return self.report

    def _wait(self, ready: Callable[[], bool], why: str, line: int) -> bool:
        """Wait for `ready`; a divergence saying `why` when it does not come."""
        try:
            self.proc.wait_for(lambda: ready() or self.proc.eof.is_set(), self.timeout, why)
        except AssertionError:
            pass
        if ready():
            return True
        ended = "the agent ended first" if self.proc.eof.is_set() else f"not within {self.timeout:g}s"
        self.report.divergences.append(Divergence(line, f"{why}: {ended}"))
        return False

    def _prepare(self, played: Script, step: Step) -> None:
        """Wait until the agent has sent what the recorded client had seen before this line (each thing waited for once)."""
        line = step.event.line
        while self._answers_seen < step.answered:
            key = played.answers[self._answers_seen]
            self._answers_seen += 1
            pending = self.sent.get(key)
            if pending is not None and not pending.done:
                self._wait(lambda: pending.done, f"waited for the answer to {pending.method} #{key} before line {line}", line)
        while self._requests_seen < step.agent_requests:
            request = played.agent_requests[self._requests_seen]
            self._requests_seen += 1
            if request.line not in self.matched:
                self._wait(lambda: request.line in self.matched,
                           f"waited for the agent's {request.method} request the trace has here", request.line)
        if step.updates is not None:
            prompt, count = step.updates
            session = step.event.session or ""
            self._wait(lambda: self._updates_since(prompt, session) >= count,
                       f"waited for {count} update(s) of the prompt #{prompt} before line {line}", line)

    def _updates_since(self, prompt: str, recorded_session: str) -> int:
        """The updates of a session since the prompt was sent again."""
        if prompt not in self.updates_before:
            return 0
        session = self.sessions.get(recorded_session, recorded_session)
        return self.updates.get(session, 0) - self.updates_before[prompt]

    def _send(self, step: Step) -> None:
        event = step.event
        if not isinstance(event.message, dict) or event.kind == "line":
            if event.raw is not None:
                self.report.sent += 1
                self.proc.send_raw(event.raw + (b"\n" if event.newline else b""))
            return
        message = map_sessions(event.message, self.sessions)
        if event.kind == "response":
            asked = next((r for r in reversed(self.recorded_agent_requests)
                          if _key(r.id) == _key(event.id) and r.line < event.line), None)
            if asked is None or asked.line not in self.matched or asked.line in self.answered_lines:
                return  # the agent did not ask this time: already a divergence
            self.answered_lines.add(asked.line)
            message = {**message, "id": self.matched[asked.line]}
        self.report.sent += 1
        if event.method == "session/prompt":
            self.updates_before[_key(event.id)] = self.updates.get(_session_of(message), 0)
        self.proc.send(message)
        if event.kind == "request":
            self.sent[_key(event.id)] = self.proc.pending[id_key(event.id)]

    def _settle(self) -> None:
        """Before EOF: wait for every answer the trace has, or for the agent to fall quiet."""
        quiet = min(1.0, self.timeout)
        owed = [p for k, p in self.sent.items() if k in self.responses]
        while not all(p.done for p in owed) and not self.proc.eof.is_set():
            seen = len(self.proc.records)
            try:
                self.proc.wait_for(lambda: len(self.proc.records) > seen or all(p.done for p in owed), quiet)
            except AssertionError:
                return

    def _exit(self) -> int | None:
        try:
            return self.proc.wait_exit(self.timeout)
        except AssertionError:
            self.report.divergences.append(Divergence(None, f"the agent did not exit within {self.timeout:g}s of EOF"))
            return None


def _session_of(message: dict[str, Any]) -> Any:
    params = message.get("params")
    return params.get("sessionId") if isinstance(params, dict) else None


# -- comparing -------------------------------------------------------------------------------------


def compare_answers(replayer: Replayer) -> None:
    """Each client request: the trace's answer against the agent's (missing, extra, error, stopReason)."""
    divergences = replayer.report.divergences
    for event in replayer.events:
        if event.sender != replayer.client_name or event.kind != "request":
            continue
        key = _key(event.id)
        recorded = replayer.responses.get(key)
        pending = replayer.sent.get(key)
        now = pending.response(0) if pending is not None and pending.done else None
        name = f"{event.method} #{key}"
        if recorded is None and now is None:
            continue
        if recorded is None:
            divergences.append(Divergence(event.line, f"{name}: the agent answered {_outcome(now)}, the trace has no answer"))
        elif now is None:
            divergences.append(Divergence(recorded.line, f"{name}: the agent never answered (the trace has {_outcome(recorded.message)})"))
        elif _outcome(recorded.message) != _outcome(now):
            divergences.append(Divergence(recorded.line, f"{name}: the trace has {_outcome(recorded.message)}, the agent answered {_outcome(now)}"))
    _compare_counts(replayer)
    for request in replayer.unmatched_requests:
        divergences.append(Divergence(None, f"the agent sent a {request.get('method')} request the trace does not have "
                                            f"(answered with an error): {json.dumps(request.get('params'))[:120]}"))


def _compare_counts(replayer: Replayer) -> None:
    """Answers given twice, and answers to no request of the client's (id null: to a line it could not read)."""
    def count(messages: Iterable[Any]) -> Counter[str]:
        return Counter(_key(m.get("id")) for m in messages if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m))

    recorded = count(e.message for e in replayer.events if e.sender != replayer.client_name)
    now = count(r.message for r in replayer.proc.records if r.direction == "in")
    asked = {_key(e.id) for e in replayer.events if e.sender == replayer.client_name and e.kind == "request"}
    for key in sorted(set(recorded) | set(now)):
        was, is_ = recorded[key], now[key]
        if is_ > max(was, 1) or (key not in asked and was != is_):
            replayer.report.divergences.append(Divergence(None, f"the agent sent {is_} answer(s) with id {key}, the trace has {was}"))


def _outcome(message: Any) -> str:
    """An answer in the few words that must match: error code, stopReason, or a result."""
    if not isinstance(message, dict):
        return "no message"
    if "error" in message:
        error = message["error"]
        return f"error {error.get('code') if isinstance(error, dict) else json.dumps(error)}"
    result = message.get("result")
    if isinstance(result, dict) and "stopReason" in result:
        return f"stopReason {json.dumps(result['stopReason'])}"
    return "a result"


def _tokens(messages: Sequence[tuple[int | None, Any]], sessions: dict[str, str]) -> dict[str, list[tuple[int | None, str]]]:
    """Per session, what the agent sent as a sequence of methods (an update by its kind), runs of
    one kind folded into one: their length varies with chunking, their order does not."""
    found: dict[str, list[tuple[int | None, str]]] = {}
    for line, message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            continue
        session = _session_of(message)
        session = sessions.get(session, session) if isinstance(session, str) else ""
        token = message["method"]
        update = message.get("params", {}).get("update") if isinstance(message.get("params"), dict) else None
        if token == "session/update" and isinstance(update, dict):
            token = f"session/update {update.get('sessionUpdate')}"
        seen = found.setdefault(session, [])
        if not seen or seen[-1][1] != token:
            seen.append((line, token))
    return found


def compare_sequences(replayer: Replayer) -> None:
    """Per session, the agent's methods in the trace against the agent's now; the first difference."""
    recorded = _tokens([(e.line, e.message) for e in replayer.events if e.sender != replayer.client_name], {})
    back = {new: old for old, new in replayer.sessions.items()}
    now = _tokens([(None, r.message) for r in replayer.proc.records if r.direction == "in"], back)
    for session in list(recorded) + [s for s in now if s not in recorded]:
        was, is_ = [t for _, t in recorded.get(session, [])], [t for _, t in now.get(session, [])]
        if was == is_:
            continue
        at = next((i for i, (a, b) in enumerate(zip(was, is_)) if a != b), min(len(was), len(is_)))
        lines = recorded.get(session, [])
        line = lines[at][0] if at < len(lines) else (lines[-1][0] if lines else None)
        where = f"session {session}" if session else "outside any session"
        before = f" after {was[at - 1]}" if at > 0 else ""
        divergences = replayer.report.divergences
        divergences.append(Divergence(line, f"{where}: the agent sent {is_[at] if at < len(is_) else 'nothing more'}{before}, "
                                            f"the trace has {was[at] if at < len(was) else 'nothing more'}"))


def replay(trace: Trace, command: Sequence[str], timeout: float = 10.0) -> ReplayReport:
    """Replay the client side of `trace`'s editor connection against `command`."""
    found = connections(trace)
    chosen = next((c for c in found if c.client == "client"), found[0] if found else None)
    if chosen is None:
        return ReplayReport([Divergence(None, "the trace holds no message to replay")])
    report = Replayer(chosen.events, command, timeout, chosen.client).run()
    footer = trace.footer
    expected = footer.get("exit") if footer is not None and footer.get("signal") is None else None
    if isinstance(expected, int) and report.exit_code != expected:
        report.divergences.append(Divergence(trace.events[-1].line, f"the agent exited with {report.exit_code}, the trace has {expected}"))
    return report


def text_report(path: str, command: Sequence[str], report: ReplayReport) -> list[str]:
    verdict = "no divergence" if report.ok else f"{len(report.divergences)} divergence(s)"
    out = [visible(f"replayed {report.sent} client lines of {path} against {' '.join(command)}: {verdict}")]
    out.extend(visible(f"{'line ' + str(d.line) if d.line is not None else 'end'}: {d.what}") for d in report.divergences)
    if not report.ok and report.stderr_tail:
        out.append("the agent's stderr ended with:")
        out.extend(visible(f"    {line}") for line in report.stderr_tail)
    return out
