"""Invariants every rig run checks, fed incrementally from a client's records.

Each broken invariant becomes a `Violation` that names the invariant and quotes the messages
that broke it, so a failing soak or probe points at the wire, not at a stack trace.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import METHOD_NOT_FOUND
from ...rpc.wire import IdKey, id_key, is_valid_id
from .client import Record
from .schema import StreamChecker, message_kind
from .schema_v2 import schema_for_version

__all__ = ["ADVISORIES", "INVARIANTS", "PROBE_METHOD_PREFIX", "TURN_UPDATES", "InvariantChecker", "Violation", "render"]

# Names are part of the rig's output (probe table, soak summary): keep them stable.
INVARIANTS = (
    "valid_json_rpc",  # every stdout line is one JSON-RPC 2.0 object
    "schema",  # ... and passes strict schema validation
    "one_response_per_request",  # each client request gets exactly one response
    "no_response_to_notification",
    "prompt_updates_in_order",  # a /stream prompt's chunks arrive 0, 1, 2, ...
    "no_update_after_response",  # nothing for a session after its prompt's, load's or resume's response (S5)
    "cancelled_answers_cancelled",
    "exit_after_eof",
    "no_orphan_processes",
    "absolute_paths",  # every file path the agent sends the client is absolute (ACP: MUST)
    "capabilities_respected",  # ACP v1: a boolean config option only to a client that advertised it
)
# Advisory: what real clients trip on although ACP allows it. Kept apart (`advisories`), so they
# never fail a soak or a test, and the probe shows them as warnings.
ADVISORIES = (
    "tool_calls_finished",  # every tool call is completed or failed before its prompt's response
    "message_id_consistent",  # chunks of one message carry one messageId; a message never resumes
    "unknown_method_not_found",  # a request for a method nobody implements is answered -32601 (ACP: should)
)
# Requests under this prefix name methods no agent implements: the probe's own (ping, unknown).
PROBE_METHOD_PREFIX = "_acp_green_probe/"
# The updates that belong to a prompt turn: under ACP none may follow the turn's response, while
# session-level updates (commands, modes, config options, session info, usage...) may come at any
# time. acp_green's own rule (S5) is stricter: nothing for the session follows the response.
TURN_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})

_STREAM = re.compile(r"^/stream\s+(\d+)")
_CHUNK_INDEX = re.compile(r"^(\d+):")
# Errors that refuse a prompt at admission, before any turn ran: a cancel cannot apply to them.
_REFUSALS = frozenset({"session_busy", "connection_busy", "output_backlog"})
#: Requests whose successful response, like a prompt's, ends what the agent sends for the session
#: until the client's next request for it: their session-level updates (commands, title) precede it.
_REOPENS = frozenset({"session/load", "session/resume"})
#: What may follow a prompt's response for a terminal the client created only after it (a
#: `terminal/create` answered late): killing and releasing it, so its command does not run on.
_LATE_CLEANUPS = frozenset({"terminal/kill", "terminal/release"})


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant and the messages that broke it."""

    invariant: str
    detail: str
    messages: tuple[str, ...] = ()

    def __str__(self) -> str:
        quoted = "".join(f"\n    {m}" for m in self.messages)
        return f"{self.invariant}: {self.detail}{quoted}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form for summaries."""
        return {"invariant": self.invariant, "detail": self.detail, "messages": list(self.messages)}


def render(record: Record, limit: int = 300) -> str:
    """One record as a short line: time, direction and the message (or raw bytes)."""
    arrow = "agent->client" if record.direction == "in" else "client->agent"
    if record.message is not None:
        text = json.dumps(record.message, separators=(",", ":"), default=repr)
    else:
        text = repr(record.raw)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"[{record.t:.3f} {arrow}] {text}"


@dataclass(slots=True)
class _Prompt:
    """What the checker knows about one prompt request the client sent."""

    record: Record
    session_id: str
    expected_chunks: int | None  # N of a `/stream N` prompt, else None
    cancel_sent: bool = False
    must_cancel: bool = False
    chunks_seen: int = 0
    grammar_off: bool = False  # the agent does not follow the /stream grammar: no order check
    tool_status: dict[str, str] = field(default_factory=dict)  # tool call id -> its latest status
    message_ids: list[str] = field(default_factory=list)  # messageIds of its chunks, each once, in order
    chunk_kind: str | None = None  # the kind of the latest chunk (a message ends when another kind starts)


@dataclass(slots=True)
class _Request:
    record: Record
    method: str
    responses: list[Record] = field(default_factory=list)


class _Findings:
    """What a run found: violations (failures) and advisories (warnings), each list bounded, and
    how often each invariant had something to check."""

    def __init__(self, max_violations: int) -> None:
        self.violations: list[Violation] = []
        self.advisories: list[Violation] = []  # broken ADVISORIES: warnings, never failures
        # How often each invariant (or advisory) had something to check: a row with nothing to
        # check says so instead of claiming the invariant held.
        self.exercised: Counter[str] = Counter()
        self.max_violations = max_violations

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, invariant: str, detail: str, records: Sequence[Record] = ()) -> None:
        """Record a violation found outside the message stream (exit, orphans)."""
        self._add(invariant, detail, records)

    def _add(self, invariant: str, detail: str, records: Sequence[Record]) -> None:
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(invariant, detail, tuple(render(r) for r in records if r is not None)))

    def _advise(self, advisory: str, detail: str, records: Sequence[Record]) -> None:
        if len(self.advisories) < self.max_violations:
            self.advisories.append(Violation(advisory, detail, tuple(render(r) for r in records if r is not None)))


class _PromptChecks(_Findings):
    """The checks on one prompt as its updates and its response arrive: chunk order, nothing for
    a session after its prompt's response, a cancelled prompt answering `cancelled`, advisories."""

    # Kept by InvariantChecker as it reads the stream (see its __init__).
    _prompts: dict[IdKey | None, _Prompt]
    _running: dict[str, IdKey | None]
    _open: dict[str, set[IdKey | None]]
    _quiet: dict[str, Record]
    _requests: dict[IdKey | None, _Request]
    prompts_answered: int
    cancelled_prompts: int
    session_updates_between_turns: bool
    protocol_version: Any

    def _quieted_by(self, session_id: str) -> str:
        """Which response a session must stay quiet after, in words: "its session/load response"."""
        response = self._quiet[session_id].message
        request = self._requests.get(id_key(response.get("id"))) if isinstance(response, dict) else None
        method = request.method if request is not None else "session/prompt"
        return "its prompt's response" if method == "session/prompt" else f"its {method} response"

    def _prompt_answered(self, prompt: _Prompt, record: Record, message: dict[str, Any]) -> None:
        key = id_key(message.get("id"))
        if self._running.get(prompt.session_id) == key:
            del self._running[prompt.session_id]
        still_open = self._open.get(prompt.session_id, set())
        still_open.discard(key)
        error = message.get("error")
        refused = isinstance(error, dict) and isinstance(error.get("data"), dict) and error["data"].get("reason") in _REFUSALS
        if refused:
            self._back_to_earlier_prompt(prompt, key)
            return
        self.prompts_answered += 1
        self.exercised["no_update_after_response"] += 1
        self._tool_calls_finished(prompt, record)
        if not still_open:  # another prompt of the session still running may still send (S8 is checked apart)
            self._quiet[prompt.session_id] = record
        stop = message.get("result", {}).get("stopReason") if isinstance(message.get("result"), dict) else None
        if stop == "cancelled":
            self.cancelled_prompts += 1
        if prompt.cancel_sent:
            # A prompt that finished on its own before the cancel mattered exercised nothing.
            if prompt.must_cancel or stop == "cancelled" or error is not None:
                self.exercised["cancelled_answers_cancelled"] += 1
            if error is not None:
                self._add("cancelled_answers_cancelled", "a cancelled prompt was answered with an error, not stopReason \"cancelled\"",
                          [prompt.record, record])
            elif prompt.must_cancel and stop != "cancelled":
                self._add("cancelled_answers_cancelled", f"a prompt that only ends by cancellation answered {stop!r}",
                          [prompt.record, record])
        elif (prompt.expected_chunks is not None and not prompt.grammar_off and stop == "end_turn"
              and 0 < prompt.chunks_seen != prompt.expected_chunks):  # no indexed chunk at all: not the /stream grammar
            self._add("prompt_updates_in_order", f"/stream {prompt.expected_chunks} ended after {prompt.chunks_seen} chunks",
                      [prompt.record, record])

    def _back_to_earlier_prompt(self, refused: _Prompt, key: IdKey | None) -> None:
        """A prompt refused (session busy) was never the session's turn: what arrived or was sent
        for the session meanwhile (tool call updates, a cancel) belongs to the prompt still running."""
        earlier = [self._prompts[k] for k in self._open.get(refused.session_id, set()) if k != key and k in self._prompts]
        if not earlier or self._running.get(refused.session_id) is not None:
            return
        running = max(earlier, key=lambda p: p.record.t)
        self._running[refused.session_id] = id_key(_object(running.record.message).get("id"))
        running.tool_status.update(refused.tool_status)
        running.cancel_sent = running.cancel_sent or refused.cancel_sent

    def _session_update(self, record: Record, message: dict[str, Any]) -> None:
        params = _object(message.get("params"))
        session_id = params.get("sessionId")
        update = _object(params.get("update"))
        if session_id in self._quiet:
            if not self.session_updates_between_turns or update.get("sessionUpdate") in TURN_UPDATES:
                self._add("no_update_after_response", f"a {update.get('sessionUpdate')} update for {session_id} after "
                          f"{self._quieted_by(session_id)}", [self._quiet[session_id], record])
            return
        key = self._running.get(session_id) if isinstance(session_id, str) else None
        prompt = self._prompts.get(key) if key is not None else None
        if prompt is not None and self.protocol_version == 2 and update.get("sessionUpdate") == "state_update" \
                and update.get("state") == "idle":
            # ACP v2: a prompt's idle state_update is where v1 answered it.
            self._prompt_answered(prompt, record, {"id": _object(prompt.record.message).get("id"),
                                                   "result": {"stopReason": update.get("stopReason")}})
            return
        if prompt is not None:
            self._advisory_update(prompt, record, update)
        if prompt is None or prompt.expected_chunks is None or prompt.grammar_off:
            return
        if update.get("sessionUpdate") != "agent_message_chunk":
            return
        text = (update.get("content") or {}).get("text", "")
        found = _CHUNK_INDEX.match(text) if isinstance(text, str) else None
        if found is None:
            if prompt.chunks_seen == 0:
                prompt.grammar_off = True  # not the demo grammar: nothing to check
                return
            self._add("prompt_updates_in_order", f"chunk {prompt.chunks_seen} of a /stream prompt has no index",
                      [prompt.record, record])
            prompt.grammar_off = True
            return
        index = int(found.group(1))
        if prompt.chunks_seen == 0:
            self.exercised["prompt_updates_in_order"] += 1
        if index != prompt.chunks_seen:
            self._add("prompt_updates_in_order", f"expected chunk {prompt.chunks_seen}, got chunk {index}",
                      [prompt.record, record])
            prompt.grammar_off = True
            return
        prompt.chunks_seen += 1

    def _advisory_update(self, prompt: _Prompt, record: Record, update: dict[str, Any]) -> None:
        """Follow a running prompt's tool calls and message chunks for the advisories."""
        kind = update.get("sessionUpdate")
        if kind in ("tool_call", "tool_call_update") and isinstance(update.get("toolCallId"), str):
            tool_id = update["toolCallId"]
            # ACP v2 sends no tool_call: a tool call's first tool_call_update creates it.
            if kind == "tool_call" or (self.protocol_version == 2 and tool_id not in prompt.tool_status):
                self.exercised["tool_calls_finished"] += 1
                prompt.tool_status[tool_id] = update.get("status") or "pending"
            elif isinstance(update.get("status"), str):
                prompt.tool_status[tool_id] = update["status"]
            prompt.chunk_kind = None
            return
        if kind not in _CHUNKS:
            prompt.chunk_kind = None
            return
        message_id = update.get("messageId")
        if not isinstance(message_id, str):
            if prompt.message_ids and prompt.chunk_kind == kind:
                self._advise("message_id_consistent", f"a {kind} without messageId continues message {prompt.message_ids[-1]!r}",
                             [prompt.record, record])
            prompt.chunk_kind = kind
            return
        self.exercised["message_id_consistent"] += 1
        if not prompt.message_ids or prompt.message_ids[-1] != message_id:
            if message_id in prompt.message_ids:
                self._advise("message_id_consistent", f"message {message_id!r} resumed after another message had started",
                             [prompt.record, record])
            else:
                prompt.message_ids.append(message_id)
        prompt.chunk_kind = kind

    def _tool_calls_finished(self, prompt: _Prompt, record: Record) -> None:
        left = {tool_id: status for tool_id, status in prompt.tool_status.items() if status not in ("completed", "failed")}
        if left:
            listing = ", ".join(f"{tool_id} ({status})" for tool_id, status in sorted(left.items()))
            self._advise("tool_calls_finished", f"the prompt answered with tool calls still open: {listing}", [prompt.record, record])


class _MessageChecks(_PromptChecks):
    """Checks on single messages of the agent: the paths it sends, its answer to a method nobody has."""

    _shows_booleans = True  # False once the client's v1 `initialize` left out session.configOptions.boolean

    def _client_initialize(self, params: dict[str, Any]) -> None:
        options = _object(_object(_object(params.get("clientCapabilities")).get("session")).get("configOptions"))
        self._shows_booleans = "clientCapabilities" not in params or isinstance(options.get("boolean"), dict)

    def _booleans_advertised(self, record: Record, message: dict[str, Any]) -> None:
        """ACP v1: a config option of type boolean only to a client that advertised
        `session.configOptions.boolean` (v2 needs no capability)."""
        if self.protocol_version != 1:
            return
        if message.get("method") == "session/update":
            options = _object(_object(message.get("params")).get("update")).get("configOptions")
        else:
            options = _object(message.get("result")).get("configOptions")
        if not isinstance(options, list):
            return
        self.exercised["capabilities_respected"] += 1
        if not self._shows_booleans and any(_object(o).get("type") == "boolean" for o in options):
            self._add("capabilities_respected", "a config option of type boolean to a client that did not advertise "
                      "session.configOptions.boolean", [record])

    def _paths(self, record: Record, message: dict[str, Any]) -> None:
        """ACP: file paths the agent sends the client are absolute (a path that is no string is no path)."""
        for where, path in _sent_paths(message):
            self.exercised["absolute_paths"] += 1
            if where.endswith("]"):  # a location that is no object: whatever it holds, it gives no path
                shown = json.dumps(path, default=repr)[:80]
                self._add("absolute_paths", f"{message.get('method')} sent {where} = {shown}, not an object with a path",
                          [record])
            elif not isinstance(path, str):
                shown = json.dumps(path, default=repr)[:80]
                self._add("absolute_paths", f"{message.get('method')} sent {where} = {shown}, not an absolute path", [record])
            elif not path.startswith("/"):
                self._add("absolute_paths", f"{message.get('method')} sent a relative path at {where}: {path!r}", [record])

    def _unknown_method_answered(self, request: _Request, record: Record, message: dict[str, Any]) -> None:
        """ACP: a request for an unknown method should be answered -32601 (a SHOULD: an advisory)."""
        self.exercised["unknown_method_not_found"] += 1
        error = message.get("error")
        if not (isinstance(error, dict) and error.get("code") == METHOD_NOT_FOUND):
            answer = f"error {error.get('code')!r}" if isinstance(error, dict) else f"result {json.dumps(message.get('result'), default=repr)[:60]}"
            self._advise("unknown_method_not_found", f"{request.method}, a method no agent has, was answered with {answer}, "
                         "not -32601", [request.record, record])


class _BatchLines(_MessageChecks):
    """A JSON-RPC batch line (an array), judged by the version negotiated: ACP v2 has batches,
    each member read as if it came alone; v1 refuses them."""

    protocol_version: Any
    _null_budget: int

    @property
    def _batches(self) -> bool:
        return isinstance(self.protocol_version, int) and self.protocol_version >= 2

    def _client_batch(self, record: Record, batch: list[Any]) -> None:
        if batch and self._batches:
            for member in batch:
                if isinstance(member, list):  # batches do not nest: such a member is answered -32600, id null
                    self._null_budget += 1
                    continue
                self._client_message(Record(record.t, record.direction, record.raw, member), member)
        else:  # ACP v1 refuses any batch, and v2 an empty one: one error, id null
            self._null_budget += 1

    def _agent_record(self, record: Record) -> None:
        """A line the agent wrote; a batch's answer (v2) is an array of responses, each checked alone."""
        batch = record.message
        if not isinstance(batch, list):
            self._agent_message(record, batch)
        elif batch and self._batches and all(message_kind(member) == "response" for member in batch):
            for member in batch:
                self._agent_message(Record(record.t, record.direction, record.raw, member), member)
        else:
            self.exercised["valid_json_rpc"] += 1
            why = ("an empty batch" if not batch else "a batch holding something other than responses" if self._batches
                   else "a batch (JSON array), which ACP v1 does not allow")
            self._add("valid_json_rpc", f"the agent wrote a line that is {why}", [record])

    def _client_message(self, record: Record, message: Any) -> None:
        raise NotImplementedError

    def _agent_message(self, record: Record, message: Any) -> None:
        raise NotImplementedError


class InvariantChecker(_BatchLines):
    """Checks one agent connection; feed it records in order, then `finish` when it ended."""

    def __init__(self, must_cancel_ids: Iterable[Any] = (), max_violations: int = 50, *,
                 session_updates_between_turns: bool = False) -> None:
        """`session_updates_between_turns`: ACP's rule, which lets session-level updates (commands,
        modes, config options, session info) follow a response; by default acp_green's S5, by
        which nothing for the session may follow it."""
        super().__init__(max_violations)
        self.session_updates_between_turns = session_updates_between_turns
        self._schema = StreamChecker("agent")
        self._requests: dict[IdKey | None, _Request] = {}
        self._prompts: dict[IdKey | None, _Prompt] = {}
        self._running: dict[str, IdKey | None] = {}  # session -> key of its latest prompt
        self._open: dict[str, set[IdKey | None]] = {}  # session -> its prompts not yet answered
        self._quiet: dict[str, Record] = {}  # session -> the prompt response after which it must stay quiet
        self._creates: dict[IdKey | None, str] = {}  # the agent's terminal/create requests -> their session
        self._given_up: set[IdKey | None] = set()  # terminal/create requests the agent cancelled ($/cancel_request)
        self._late_terminals: set[tuple[str, str]] = set()  # (session, terminalId) created after the session went quiet
        self._null_budget = 0  # client lines that may legitimately be answered with id null
        self._last_notification: Record | None = None
        self._must_cancel = {id_key(i) for i in must_cancel_ids}
        self._fed = 0
        self.responses = 0
        self.prompts_answered = 0
        self.cancelled_prompts = 0
        self.protocol_version: Any = None  # what the agent's initialize answer negotiated, once seen
        self.schema_notes: list[str] = []  # why some messages could not be validated (no schema for their version)
        self._schema_off = False

    # -- public ------------------------------------------------------------------------------
    def expect_cancelled(self, request_id: Any) -> None:
        """Declare a prompt that cannot end on its own: once cancelled it must answer `cancelled`."""
        self._must_cancel.add(id_key(request_id))
        prompt = self._prompts.get(id_key(request_id))
        if prompt is not None:
            prompt.must_cancel = True

    def allow_null_answer(self) -> None:
        """The client's next line may be answered with one error with id null (a batch refused as a
        whole: the caller judges that itself, as an advisory)."""
        self._null_budget += 1

    def update(self, records: Sequence[Record]) -> list[Violation]:
        """Check the records not seen yet; returns the new violations."""
        before = len(self.violations)
        while self._fed < len(records):
            record = records[self._fed]
            self._fed += 1
            if record.direction == "out":
                self._client_record(record)
            else:
                self._agent_record(record)
        return self.violations[before:]

    def gave_up(self, request_id: Any, waited: float) -> None:
        """The client stopped waiting for a request's answer after `waited` seconds, the connection still open."""
        request = self._requests.get(id_key(request_id))
        if request is not None and not request.responses:
            self._add("one_response_per_request", f"{request.method} #{request_id!r} got no response within {waited:g}s",
                      [request.record])

    def finish(self, records: Sequence[Record], *, complete: bool | str = True) -> list[Violation]:
        """Final checks once the connection is over.

        `complete=True`: every request must have been answered (the agent read all its input:
        it saw EOF). `complete="read"`: only requests the agent must have read, those sent before
        a request it answered (an agent reads in order; a signal may stop it before the rest).
        `complete=False`: no answer is owed.
        """
        before = len(self.violations)
        self.update(records)
        requests = list(self._requests.values())  # in the order the client sent them
        if complete == "read":
            answered = [i for i, r in enumerate(requests) if r.responses]
            requests = requests[: answered[-1]] if answered else []
        elif not complete:
            requests = []
        for request in requests:
            if not request.responses:
                self._add("one_response_per_request", f"{request.method} #{request.record.message['id']!r} never got a response",
                          [request.record])
        return self.violations[before:]

    # -- client side -------------------------------------------------------------------------
    def _client_record(self, record: Record) -> None:
        if record.message is not None:
            self._client_message(record, record.message)
            return
        for line in record.raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                # Strict UTF-8 first: json.loads(bytes) would let encoded surrogates through, and
                # an agent must answer such a line -32700 like any garbage. A line nested deeper
                # than the recursion limit is garbage to this checker too, not a crash.
                message = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                self._null_budget += 1  # garbage: answered with -32700, id null
                continue
            self._client_message(Record(record.t, "out", line, message), message)

    def _client_message(self, record: Record, message: Any) -> None:
        if isinstance(message, list):
            self._client_batch(record, message)
            return
        self._schema.observe(message, from_sender=False)
        kind = message_kind(message)
        raw_params = message.get("params") if isinstance(message, dict) else None
        params_ok = raw_params is None or isinstance(raw_params, (dict, list))
        if kind is None or (kind == "request" and not is_valid_id(message.get("id"))) or (kind == "notification" and not params_ok):
            self._null_budget += 1  # an invalid request (or message) may be answered with id null
            return
        if kind == "response":
            self._terminal_created(message)
            return
        params = _object(message.get("params"))
        session_id = params.get("sessionId") if isinstance(params.get("sessionId"), str) else None
        if kind == "notification":
            self.exercised["no_response_to_notification"] += 1
            self._last_notification = record
            if message.get("method") == "session/cancel" and session_id in self._running:
                prompt = self._prompts.get(self._running[session_id])
                if prompt is not None:
                    prompt.cancel_sent = True
            return
        key = id_key(message["id"])
        if message["id"] is None:
            self._null_budget += 1
        self.exercised["one_response_per_request"] += 1
        self._requests[key] = _Request(record, message.get("method"))
        if message.get("method") == "initialize":
            self._client_initialize(params)
        if session_id is not None:
            self._quiet.pop(session_id, None)  # the client's next request for the session (S5)
        if message.get("method") == "session/prompt" and session_id is not None:
            match = _STREAM.match(_prompt_text(params))
            self._prompts[key] = _Prompt(record, session_id, int(match.group(1)) if match else None,
                                         must_cancel=key in self._must_cancel)
            self._running[session_id] = key
            self._open.setdefault(session_id, set()).add(key)

    # -- agent side --------------------------------------------------------------------------
    def _agent_message(self, record: Record, message: Any) -> None:
        self.exercised["valid_json_rpc"] += 1
        if not isinstance(message, dict) or message_kind(message) is None:
            self.exercised["schema"] += 1
            text = "not JSON" if message is None else "not a JSON-RPC request, notification or response"
            self._add("valid_json_rpc", f"the agent wrote a line that is {text}", [record])
            return
        self._negotiated(message)
        if not self._schema_off:
            self.exercised["schema"] += 1
            problems = self._schema.observe(message, from_sender=True)
            if problems:
                self._add("schema", "; ".join(problems[:3]), [record])
            self._booleans_advertised(record, message)
        kind = message_kind(message)
        if kind in ("request", "notification"):
            self._paths(record, message)
        if kind == "response":
            self._response(record, message)
        elif kind == "notification" and message.get("method") == "session/update":
            self._session_update(record, message)
        elif kind == "notification" and message.get("method") == "$/cancel_request":
            given_up = _object(message.get("params")).get("requestId")
            if is_valid_id(given_up) and id_key(given_up) in self._creates:
                self._given_up.add(id_key(given_up))
        elif kind == "request":
            self._agent_request(record, message)

    def _negotiated(self, message: dict[str, Any]) -> None:
        """On the answer to `initialize`, validate the connection against the schema of the version it negotiated."""
        request = self._requests.get(id_key(message.get("id"))) if message_kind(message) == "response" else None
        result = message.get("result")
        if request is None or request.method != "initialize" or not isinstance(result, dict) or "protocolVersion" not in result:
            return
        version = self.protocol_version = result["protocolVersion"]
        schema = schema_for_version(version)
        if schema is None:
            self._schema_off = True
            self.schema_notes.append(f"a run negotiated protocolVersion {json.dumps(version)}, which no vendored schema "
                                     "describes: its messages were not validated")
        else:
            self._schema.schema = schema
            if version != 1:
                self.schema_notes.append(f"a run negotiated protocolVersion {version}: validated against the ACP v{version} "
                                         "draft schema")

    def _agent_request(self, record: Record, message: dict[str, Any]) -> None:
        """A request to the client about a session (fs, terminal, permission...) is "for the
        session" too: none may follow its prompt's response (S5), but the kill and release of a
        terminal the client created only after that response."""
        params = _object(message.get("params"))
        session_id = params.get("sessionId")
        if message.get("method") == "terminal/create" and isinstance(session_id, str):
            self._creates[id_key(message.get("id"))] = session_id
        if message.get("method") in _LATE_CLEANUPS and (session_id, params.get("terminalId")) in self._late_terminals:
            return
        if isinstance(session_id, str) and session_id in self._quiet:
            self._add("no_update_after_response", f"{message.get('method')} for {session_id} after {self._quieted_by(session_id)}",
                      [self._quiet[session_id], record])

    def _terminal_created(self, message: dict[str, Any]) -> None:
        """The client's answer to a terminal/create: a terminal made after the agent gave up on it
        (cancelled the request) or after its session went quiet may be killed and released late."""
        if not is_valid_id(message.get("id")):
            return
        key = id_key(message.get("id"))
        session_id = self._creates.pop(key, None)
        given_up = key in self._given_up
        self._given_up.discard(key)
        terminal_id = _object(message.get("result")).get("terminalId")
        if session_id is not None and (given_up or session_id in self._quiet) and isinstance(terminal_id, str):
            self._late_terminals.add((session_id, terminal_id))

    def _response(self, record: Record, message: dict[str, Any]) -> None:
        self.responses += 1
        rid = message.get("id")
        request = self._requests.get(id_key(rid))  # an invalid id's None key is never stored
        if request is None:
            if rid is None and self._null_budget > 0 and "error" in message:
                self._null_budget -= 1
                return
            context = [self._last_notification] if self._last_notification is not None and rid is None else []
            what = "answers no request (a notification was answered?)" if rid is None else f"has id {rid!r}, which the client never sent"
            self._add("no_response_to_notification" if rid is None else "one_response_per_request", f"a response {what}",
                      [*context, record])
            return
        request.responses.append(record)
        if len(request.responses) > 1:
            self._add("one_response_per_request", f"{request.method} #{rid!r} was answered {len(request.responses)} times",
                      [request.record, *request.responses])
            return
        if isinstance(request.method, str) and request.method.startswith(PROBE_METHOD_PREFIX):
            self._unknown_method_answered(request, record, message)
        prompt = self._prompts.get(id_key(rid))
        if prompt is not None and self.protocol_version == 2 and "result" in message:
            return  # ACP v2: the acknowledgement; the turn ends with its idle state_update (_v2_idle)
        if prompt is not None:
            self._prompt_answered(prompt, record, message)
        elif request.method in _REOPENS and "result" in message:
            session_id = _object(_object(request.record.message).get("params")).get("sessionId")
            if isinstance(session_id, str) and not self._open.get(session_id):
                self.exercised["no_update_after_response"] += 1
                self._quiet[session_id] = record



_CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk"})


def _object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one: what an agent sent may be any shape."""
    return value if isinstance(value, dict) else {}


def _sent_paths(message: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(where, value) for every file path in an agent's request or notification to the client.

    The value is what stands where a path must be, whatever it is: a location that is a bare
    string, or a path that is no string, is a malformed path, not an absent one."""
    params = _object(message.get("params"))
    method = message.get("method")
    if method in ("fs/read_text_file", "fs/write_text_file") and "path" in params:
        yield "path", params["path"]
    elif method == "terminal/create" and params.get("cwd") is not None:
        yield "cwd", params["cwd"]
    tool = params.get("update") if method == "session/update" else params.get("toolCall") if method == "session/request_permission" else None
    if method == "session/request_permission" and tool is None:  # ACP v2: the tool call is the request's subject
        tool = _object(params.get("subject")).get("toolCall")
    if not isinstance(tool, dict):
        return
    for i, location in enumerate(tool.get("locations") or [] if isinstance(tool.get("locations"), list) else []):
        if isinstance(location, dict):
            yield f"locations[{i}].path", location.get("path")
        else:
            yield f"locations[{i}]", location
    for i, block in enumerate(tool.get("content") or [] if isinstance(tool.get("content"), list) else []):
        if isinstance(block, dict) and block.get("type") == "diff" and isinstance(block.get("changes"), list):
            for j, change in enumerate(block["changes"]):  # ACP v2: each change names its paths
                for name in ("path", "oldPath") if isinstance(change, dict) and "oldPath" in change else ("path",):
                    yield f"content[{i}].changes[{j}].{name}", _object(change).get(name)
        elif isinstance(block, dict) and block.get("type") == "diff":
            yield f"content[{i}].path", block.get("path")


def _prompt_text(params: dict[str, Any]) -> str:
    blocks = params.get("prompt")
    if not isinstance(blocks, list):
        return ""
    return "".join(b["text"] for b in blocks
                   if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)).strip()
