"""The rig's checks on each prompt a client sends, as its updates and its response arrive.

`PromptTurns` follows each session's prompts (and its loads and resumes) to their answers: a
/stream prompt's chunks in order, nothing for a session after the response that ends what it
sends (S5), a cancelled prompt answering `cancelled`. Its `TurnAdvisories` judge what real
clients trip on: tool calls left open, a message whose chunks change their messageId.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...rpc.wire import IdKey, id_key
from .client import Record
from .invariant_findings import Findings, as_object
from .invariant_lines import Negotiation, RequestLedger, SentRequest

__all__ = ["PromptTurns", "TURN_UPDATES", "TurnAdvisories"]

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
_CHUNKS = frozenset({"agent_message_chunk", "agent_thought_chunk"})
#: ACP v2's states of foreground work under way (StateUpdate): a turn's idle update follows one.
_ACTIVE_STATES = frozenset({"running", "requires_action"})
_REQUEST_CANCELLED = -32800


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
    # The messageId of its latest message, and every one its chunks carried: a set, since a flood of
    # distinct ids checked against a list took quadratic time (40,000 chunks: 20 s).
    message_id: str | None = None
    message_ids: set[str] = field(default_factory=set)
    chunk_kind: str | None = None  # the kind of the latest chunk (a message ends when another kind starts)
    under_way: bool = False  # ACP v2: acknowledged, or its session reported running since it was sent


class PromptTurns:
    """The checks on each prompt as its updates and its response arrive: chunk order, nothing for
    a session after its prompt's (or load's, resume's) response, a cancelled prompt answering
    `cancelled`; the advisories on what the prompt sends are its `advice`'s."""

    def __init__(self, findings: Findings, version: Negotiation, requests: RequestLedger, must_cancel_ids: Iterable[Any] = (), *,
                 session_updates_between_turns: bool = False) -> None:
        self.findings = findings
        self.advice = TurnAdvisories(findings, version)
        # ACP's rule, which lets session-level updates follow a response; else acp_green's S5.
        self.session_updates_between_turns = session_updates_between_turns
        self.prompts_answered = 0
        self.cancelled_prompts = 0
        self._version = version
        self._requests = requests
        self._prompts: dict[IdKey | None, _Prompt] = {}
        self._running: dict[str, IdKey | None] = {}  # session -> key of its latest prompt
        self._open: dict[str, set[IdKey | None]] = {}  # session -> its prompts not yet answered
        self._quiet: dict[str, Record] = {}  # session -> the prompt response after which it must stay quiet
        self._must_cancel = {id_key(i) for i in must_cancel_ids}

    def expect_cancelled(self, request_id: Any) -> None:
        """Declare a prompt that cannot end on its own: once cancelled it must answer `cancelled`."""
        self._must_cancel.add(id_key(request_id))
        prompt = self._prompts.get(id_key(request_id))
        if prompt is not None:
            prompt.must_cancel = True

    def is_quiet(self, session_id: str) -> bool:
        """Whether nothing more may come for the session until the client's next request for it (S5)."""
        return session_id in self._quiet

    # -- the client's side -------------------------------------------------------------------
    def cancel_sent(self, session_id: str | None) -> None:
        """The client's session/cancel: the session's running prompt was cancelled."""
        if session_id in self._running:
            prompt = self._prompts.get(self._running[session_id])
            if prompt is not None:
                prompt.cancel_sent = True

    def request_sent(self, record: Record, message: dict[str, Any], params: dict[str, Any], session_id: str | None) -> None:
        """A request of the client for a session reopens it; a prompt starts a turn."""
        if session_id is not None:
            self._quiet.pop(session_id, None)  # the client's next request for the session (S5)
        if message.get("method") == "session/prompt" and session_id is not None:
            key = id_key(message["id"])
            match = _STREAM.match(_prompt_text(params))
            self._prompts[key] = _Prompt(record, session_id, int(match.group(1)) if match else None,
                                         must_cancel=key in self._must_cancel)
            self._running[session_id] = key
            self._open.setdefault(session_id, set()).add(key)

    # -- the agent's side --------------------------------------------------------------------
    def response(self, request: SentRequest, record: Record, message: dict[str, Any]) -> None:
        """The agent's first answer to a request: a prompt's ends its turn, a load's or a resume's quiets the session."""
        # Only an answer to a prompt is a prompt's: under v2 the acknowledgement frees the prompt's
        # id, and a later request may take it (session/list answered with that id ends no turn).
        prompt = self._prompts.get(id_key(message.get("id"))) if request.method == "session/prompt" else None
        if prompt is not None and self._version.protocol_version == 2 and "messageId" in as_object(message.get("result")):
            prompt.under_way = True  # ACP v2: the acknowledgement; the turn ends with its idle state_update (session_update)
            return
        if prompt is not None:
            self._prompt_answered(prompt, record, message)
        elif request.method in _REOPENS and "result" in message:
            session_id = as_object(as_object(request.record.message).get("params")).get("sessionId")
            if isinstance(session_id, str) and not self._open.get(session_id):
                self.findings.exercised["no_update_after_response"] += 1
                self._quiet[session_id] = record

    def agent_request(self, record: Record, message: dict[str, Any]) -> None:
        """A request to the client about a session (fs, terminal, permission...) is "for the
        session" too: none may follow its prompt's response (S5)."""
        session_id = as_object(message.get("params")).get("sessionId")
        if isinstance(session_id, str) and session_id in self._quiet:
            self.findings.add("no_update_after_response", f"{message.get('method')} for {session_id} after {self._quieted_by(session_id)}",
                              [self._quiet[session_id], record])

    def _quieted_by(self, session_id: str) -> str:
        """Which response a session must stay quiet after, in words: "its session/load response"."""
        response = self._quiet[session_id].message
        request = self._requests.get(response.get("id")) if isinstance(response, dict) else None
        method = request.method if request is not None else "session/prompt"
        return "its prompt's response" if method == "session/prompt" else f"its {method} response"

    def _prompt_answered(self, prompt: _Prompt, record: Record, message: dict[str, Any], *, turn_end: bool = False) -> None:
        """A prompt's answer (`turn_end`: ACP v2's idle state_update that ended its turn)."""
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
        self.findings.exercised["no_update_after_response"] += 1
        self.advice.answered(prompt, record)
        if not still_open:  # another prompt of the session still running may still send (S8 is checked apart)
            self._quiet[prompt.session_id] = record
        stop = message.get("result", {}).get("stopReason") if isinstance(message.get("result"), dict) else None
        if stop == "cancelled":
            self.cancelled_prompts += 1
        if prompt.cancel_sent and error is not None and self._version.protocol_version == 2 and not turn_end:
            # ACP v2: session/cancel "cancels ... its prompts not yet inserted"; such a prompt is
            # answered with an error (-32800, Request Cancelled) and no turn ran to report cancelled.
            if as_object(error).get("code") == _REQUEST_CANCELLED:
                self.findings.exercised["cancelled_answers_cancelled"] += 1
        elif prompt.cancel_sent:
            # A prompt that finished on its own before the cancel mattered exercised nothing.
            if prompt.must_cancel or stop == "cancelled" or error is not None:
                self.findings.exercised["cancelled_answers_cancelled"] += 1
            if error is not None:
                what = ("a cancelled turn ended idle with stopReason \"error\"" if turn_end
                        else "a cancelled prompt was answered with an error")
                self.findings.add("cancelled_answers_cancelled", f"{what}, not stopReason \"cancelled\"", [prompt.record, record])
            elif prompt.must_cancel and stop != "cancelled":
                self.findings.add("cancelled_answers_cancelled", f"a prompt that only ends by cancellation answered {stop!r}",
                                  [prompt.record, record])
        elif (prompt.expected_chunks is not None and not prompt.grammar_off and stop == "end_turn"
              and 0 < prompt.chunks_seen != prompt.expected_chunks):  # no indexed chunk at all: not the /stream grammar
            self.findings.add("prompt_updates_in_order", f"/stream {prompt.expected_chunks} ended after {prompt.chunks_seen} chunks",
                              [prompt.record, record])

    def _state(self, session_id: Any, prompt: _Prompt | None, record: Record, update: dict[str, Any]) -> None:
        """ACP v2's state_update: `running` (or `requires_action`) puts the session's open prompts under
        way; `idle` ends the running prompt's turn, where v1 answered it, once that turn is under way.
        An idle update before that is a snapshot of the state the session was in, not the turn's end."""
        if update.get("state") in _ACTIVE_STATES:
            for open_key in self._open.get(session_id, set()) if isinstance(session_id, str) else ():
                if open_key in self._prompts:
                    self._prompts[open_key].under_way = True
            return
        if update.get("state") != "idle" or prompt is None or not prompt.under_way:
            return
        request_id = as_object(prompt.record.message).get("id")
        if update.get("stopReason") == "error":  # ErrorStopReason: the turn failed with this error
            error = update.get("error") if isinstance(update.get("error"), dict) else {"code": -32603, "message": "error"}
            self._prompt_answered(prompt, record, {"id": request_id, "error": error}, turn_end=True)
        else:
            self._prompt_answered(prompt, record, {"id": request_id, "result": {"stopReason": update.get("stopReason")}},
                                  turn_end=True)

    def _back_to_earlier_prompt(self, refused: _Prompt, key: IdKey | None) -> None:
        """A prompt refused (session busy) was never the session's turn: what arrived or was sent
        for the session meanwhile (tool call updates, a cancel) belongs to the prompt still running."""
        earlier = [self._prompts[k] for k in self._open.get(refused.session_id, set()) if k != key and k in self._prompts]
        if not earlier or self._running.get(refused.session_id) is not None:
            return
        running = max(earlier, key=lambda p: p.record.t)
        self._running[refused.session_id] = id_key(as_object(running.record.message).get("id"))
        running.tool_status.update(refused.tool_status)
        running.cancel_sent = running.cancel_sent or refused.cancel_sent

    def session_update(self, record: Record, message: dict[str, Any]) -> None:
        """A session/update of the agent: nothing after its session went quiet, a /stream prompt's chunks in order."""
        params = as_object(message.get("params"))
        session_id = params.get("sessionId")
        update = as_object(params.get("update"))
        if session_id in self._quiet:
            if not self.session_updates_between_turns or update.get("sessionUpdate") in TURN_UPDATES:
                self.findings.add("no_update_after_response", f"a {update.get('sessionUpdate')} update for {session_id} after "
                                  f"{self._quieted_by(session_id)}", [self._quiet[session_id], record])
            return
        key = self._running.get(session_id) if isinstance(session_id, str) else None
        prompt = self._prompts.get(key) if key is not None else None
        if self._version.protocol_version == 2 and update.get("sessionUpdate") == "state_update":
            self._state(session_id, prompt, record, update)
            return
        if prompt is not None:
            self.advice.update(prompt, record, update)
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
            self.findings.add("prompt_updates_in_order", f"chunk {prompt.chunks_seen} of a /stream prompt has no index",
                              [prompt.record, record])
            prompt.grammar_off = True
            return
        index = int(found.group(1))
        if prompt.chunks_seen == 0:
            self.findings.exercised["prompt_updates_in_order"] += 1
        if index != prompt.chunks_seen:
            self.findings.add("prompt_updates_in_order", f"expected chunk {prompt.chunks_seen}, got chunk {index}",
                              [prompt.record, record])
            prompt.grammar_off = True
            return
        prompt.chunks_seen += 1


class TurnAdvisories:
    """The advisories on a running prompt: every tool call finished before its response, one
    messageId for the chunks of one message and a message never resumed."""

    def __init__(self, findings: Findings, version: Negotiation) -> None:
        self.findings = findings
        self._version = version

    def update(self, prompt: _Prompt, record: Record, update: dict[str, Any]) -> None:
        """Follow a running prompt's tool calls and message chunks."""
        kind = update.get("sessionUpdate")
        if kind in ("tool_call", "tool_call_update") and isinstance(update.get("toolCallId"), str):
            tool_id = update["toolCallId"]
            # ACP v2 sends no tool_call: a tool call's first tool_call_update creates it.
            if kind == "tool_call" or (self._version.protocol_version == 2 and tool_id not in prompt.tool_status):
                self.findings.exercised["tool_calls_finished"] += 1
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
            if prompt.message_id is not None and prompt.chunk_kind == kind:
                self.findings.advise("message_id_consistent", f"a {kind} without messageId continues message {prompt.message_id!r}",
                                     [prompt.record, record])
            prompt.chunk_kind = kind
            return
        self.findings.exercised["message_id_consistent"] += 1
        if prompt.message_id != message_id:
            if message_id in prompt.message_ids:
                self.findings.advise("message_id_consistent", f"message {message_id!r} resumed after another message had started",
                                     [prompt.record, record])
            else:
                prompt.message_ids.add(message_id)
                prompt.message_id = message_id
        prompt.chunk_kind = kind

    def answered(self, prompt: _Prompt, record: Record) -> None:
        """The prompt was answered: its tool calls should all have finished."""
        left = {tool_id: status for tool_id, status in prompt.tool_status.items() if status not in ("completed", "failed")}
        if left:
            listing = ", ".join(f"{tool_id} ({status})" for tool_id, status in sorted(left.items()))
            self.findings.advise("tool_calls_finished", f"the prompt answered with tool calls still open: {listing}", [prompt.record, record])


def _prompt_text(params: dict[str, Any]) -> str:
    blocks = params.get("prompt")
    if not isinstance(blocks, list):
        return ""
    return "".join(b["text"] for b in blocks
                   if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)).strip()
