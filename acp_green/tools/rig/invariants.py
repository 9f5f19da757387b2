"""Invariants every rig run checks, fed incrementally from a client's records.

Each broken invariant becomes a `Violation` that names the invariant and quotes the messages
that broke it, so a failing soak or probe points at the wire, not at a stack trace. The
`InvariantChecker` reads each line in order and hands it to the collaborator whose concern it
is (invariant_lines.py: the version, batches, answers, single messages, late terminals;
invariant_prompts.py: each prompt's turn).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ...rpc.wire import is_valid_id
from .client import Record
from .forwarding import ForwardedAttribute, ForwardedMethod
from .invariant_findings import Findings, Violation, as_object, render
from .invariant_lines import BatchLines, LateTerminals, MessageChecks, Negotiation, RequestLedger
from .invariant_prompts import TURN_UPDATES, PromptTurns
from .schema import message_kind

__all__ = ["ADVISORIES", "INVARIANTS", "PROBE_METHOD_PREFIX", "TURN_UPDATES", "Findings", "InvariantChecker", "Violation", "render"]

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


class InvariantChecker:
    """Checks one agent connection; feed it records in order, then `finish` when it ended.

    What it found is its `findings`'; each line goes to the collaborator whose concern it is:
    `version` (the protocol version negotiated, the schema), `batches` (batch lines), `requests`
    (one answer per request), `messages` (paths, config options, unknown methods), `terminals`
    (those created late), `prompts` (each prompt's turn and its advisories)."""

    violations: ForwardedAttribute[list[Violation]] = ForwardedAttribute("findings")
    advisories: ForwardedAttribute[list[Violation]] = ForwardedAttribute("findings")
    exercised: ForwardedAttribute[Counter[str]] = ForwardedAttribute("findings")
    max_violations: ForwardedAttribute[int] = ForwardedAttribute("findings")
    ok: ForwardedAttribute[bool] = ForwardedAttribute("findings")
    add = ForwardedMethod("findings", Findings.add)
    responses: ForwardedAttribute[int] = ForwardedAttribute("requests")
    prompts_answered: ForwardedAttribute[int] = ForwardedAttribute("prompts")
    cancelled_prompts: ForwardedAttribute[int] = ForwardedAttribute("prompts")
    session_updates_between_turns: ForwardedAttribute[bool] = ForwardedAttribute("prompts")
    expect_cancelled = ForwardedMethod("prompts", PromptTurns.expect_cancelled)
    gave_up = ForwardedMethod("requests", RequestLedger.gave_up)
    protocol_version: ForwardedAttribute[Any] = ForwardedAttribute("version")  # what the initialize answer negotiated
    schema_notes: ForwardedAttribute[list[str]] = ForwardedAttribute("version")
    # True: a response's id is judged by the id invariants only, not again by the schema (one fault, one count).
    leaves_ids: ForwardedAttribute[bool] = ForwardedAttribute("version")

    def __init__(self, must_cancel_ids: Iterable[Any] = (), max_violations: int = 50, *,
                 session_updates_between_turns: bool = False, findings: Findings | None = None) -> None:
        """`session_updates_between_turns`: ACP's rule, which lets session-level updates (commands,
        modes, config options, session info) follow a response; by default acp_green's S5, by
        which nothing for the session may follow it. `findings`: where what is found goes (a
        trace check keeps the lines of its file), else `Findings(max_violations)`."""
        self.findings = findings if findings is not None else Findings(max_violations)
        self.version = Negotiation()
        self.requests = RequestLedger(self.findings)
        self.batches = BatchLines(self.findings, self.version, self.requests)
        self.messages = MessageChecks(self.findings, self.version)
        self.prompts = PromptTurns(self.findings, self.version, self.requests, must_cancel_ids,
                                   session_updates_between_turns=session_updates_between_turns)
        self.terminals = LateTerminals(self.prompts.is_quiet)
        self._fed = 0

    # -- public ------------------------------------------------------------------------------
    def allow_null_answer(self) -> None:
        """The client's next line may be answered with one error with id null (a batch refused as a
        whole: the caller judges that itself, as an advisory)."""
        self.requests.null_budget += 1

    def update(self, records: Sequence[Record]) -> list[Violation]:
        """Check the records not seen yet; returns the new violations."""
        before = len(self.violations)
        while self._fed < len(records):
            record = records[self._fed]
            self._fed += 1
            if record.direction == "out":
                self._client_record(record)
            else:
                self.batches.agent_line(record, self._agent_message)
        return self.violations[before:]

    def finish(self, records: Sequence[Record], *, complete: bool | str = True) -> list[Violation]:
        """Final checks once the connection is over.

        `complete=True`: every request must have been answered (the agent read all its input:
        it saw EOF). `complete="read"`: only requests the agent must have read, those sent before
        a request it answered (an agent reads in order; a signal may stop it before the rest).
        `complete=False`: no answer is owed.
        """
        before = len(self.violations)
        self.update(records)
        self.requests.unanswered(complete)
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
                self.requests.null_budget += 1  # garbage: answered with -32700, id null
                continue
            self._client_message(Record(record.t, "out", line, message), message)

    def _client_message(self, record: Record, message: Any) -> None:
        if isinstance(message, list):
            self.batches.client_batch(record, message, self._client_message)
            return
        self.version.client_sent(message)
        kind = message_kind(message)
        raw_params = message.get("params") if isinstance(message, dict) else None
        params_ok = raw_params is None or isinstance(raw_params, (dict, list))
        if kind is None or (kind == "request" and not is_valid_id(message.get("id"))) or (kind == "notification" and not params_ok):
            self.requests.null_budget += 1  # an invalid request (or message) may be answered with id null
            return
        if kind == "response":
            self.terminals.client_answered(message)
            return
        params = as_object(message.get("params"))
        session_id = params.get("sessionId") if isinstance(params.get("sessionId"), str) else None
        if kind == "notification":
            self.requests.notified(record)
            if message.get("method") == "session/cancel":
                self.prompts.cancel_sent(session_id)
            return
        self.requests.sent(record, message)
        if message.get("method") == "initialize":
            self.messages.client_initialize(params)
        self.prompts.request_sent(record, message, params, session_id)

    # -- agent side --------------------------------------------------------------------------
    def _agent_message(self, record: Record, message: Any) -> None:
        self.exercised["valid_json_rpc"] += 1
        kind = message_kind(message)
        if not isinstance(message, dict) or kind is None:
            self.exercised["schema"] += 1
            text = "not JSON" if message is None else "not a JSON-RPC request, notification or response"
            self.add("valid_json_rpc", f"the agent wrote a line that is {text}", [record])
            return
        if kind == "response":
            self.version.answered(self.requests.get(message.get("id")), message)
        problems = self.version.agent_problems(message)
        if problems is not None:
            self.exercised["schema"] += 1
            if problems:
                self.add("schema", "; ".join(problems[:3]), [record])
            self.messages.booleans_advertised(record, message)
        if kind in ("request", "notification"):
            self.messages.paths(record, message)
        if kind == "response":
            self._response(record, message)
        elif kind == "notification" and message.get("method") == "session/update":
            self.prompts.session_update(record, message)
        elif kind == "notification" and message.get("method") == "$/cancel_request":
            self.terminals.agent_cancelled(message)
        elif kind == "request" and not self.terminals.agent_request(message):  # a late terminal's cleanup may follow (S5)
            self.prompts.agent_request(record, message)

    def _response(self, record: Record, message: dict[str, Any]) -> None:
        request = self.requests.answered(record, message)
        if request is None:
            return
        if isinstance(request.method, str) and request.method.startswith(PROBE_METHOD_PREFIX):
            self.messages.unknown_method_answered(request, record, message)
        self.prompts.response(request, record, message)
