"""The rig's checks on single lines and messages of a connection: the protocol version it
negotiated (and the schema that follows), batch lines, the answers to the client's requests, the
paths and config options the agent sends, and the terminals a client created late.

Each is a collaborator of `InvariantChecker` (invariants.py), which feeds it in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import METHOD_NOT_FOUND
from ...rpc.wire import IdKey, id_key, is_valid_id
from .client import Record
from .invariant_findings import Findings, as_object
from .schema import StreamChecker, message_kind
from .schema_v2 import schema_for_version

__all__ = ["BatchLines", "LateTerminals", "MessageChecks", "Negotiation", "RequestLedger", "SentRequest"]

#: What may follow a prompt's response for a terminal the client created only after it (a
#: `terminal/create` answered late): killing and releasing it, so its command does not run on.
_LATE_CLEANUPS = frozenset({"terminal/kill", "terminal/release"})
#: What the schema checker says of a response's id (schema.py's StreamChecker: no id member, an id
#: the client never sent or already had answered, an id of no JSON-RPC type). Each such fault is the
#: id rules' (one_response_per_request, no_response_to_notification, and the probe's id and -32700
#: rows), counted there once: the schema invariant leaves it to them.
ID_PROBLEMS = ("response has no id", "response to unknown id ", "id must be an integer, a string or null")


@dataclass(slots=True)
class SentRequest:
    """A request the client sent, and the agent's answers to it."""

    record: Record
    method: str
    responses: list[Record] = field(default_factory=list)


class RequestLedger:
    """The client's requests and the agent's answers: each request answered once, no notification
    answered, an answer with id null only to a line that may be answered so."""

    def __init__(self, findings: Findings) -> None:
        self.findings = findings
        self.requests: dict[IdKey | None, SentRequest] = {}  # in the order the client sent them
        self.null_budget = 0  # client lines that may legitimately be answered with id null
        self.last_notification: Record | None = None
        self.responses = 0

    def get(self, request_id: Any) -> SentRequest | None:
        return self.requests.get(id_key(request_id))

    def notified(self, record: Record) -> None:
        """The client sent a notification: nothing may answer it."""
        self.findings.exercised["no_response_to_notification"] += 1
        self.last_notification = record

    def sent(self, record: Record, message: dict[str, Any]) -> None:
        """The client sent a request (its id valid): exactly one answer is owed."""
        if message["id"] is None:
            self.null_budget += 1
        self.findings.exercised["one_response_per_request"] += 1
        self.requests[id_key(message["id"])] = SentRequest(record, message["method"])

    def answered(self, record: Record, message: dict[str, Any]) -> SentRequest | None:
        """The request a response of the agent answers for the first time; None for a response
        that answers nothing the client sent, or answers it again (a violation)."""
        self.responses += 1
        rid = message.get("id")
        request = self.requests.get(id_key(rid))  # an invalid id's None key is never stored
        if request is None:
            if rid is None and self.null_budget > 0 and "error" in message:
                self.null_budget -= 1
                return None
            context = [self.last_notification] if self.last_notification is not None and rid is None else []
            what = "answers no request (a notification was answered?)" if rid is None else f"has id {rid!r}, which the client never sent"
            self.findings.add("no_response_to_notification" if rid is None else "one_response_per_request", f"a response {what}",
                              [*context, record])
            return None
        request.responses.append(record)
        if len(request.responses) > 1:
            self.findings.add("one_response_per_request", f"{request.method} #{rid!r} was answered {len(request.responses)} times",
                              [request.record, *request.responses])
            return None
        return request

    def gave_up(self, request_id: Any, waited: float) -> None:
        """The client stopped waiting for a request's answer after `waited` seconds, the connection still open."""
        request = self.requests.get(id_key(request_id))
        if request is not None and not request.responses:
            self.findings.add("one_response_per_request", f"{request.method} #{request_id!r} got no response within {waited:g}s",
                              [request.record])

    def unanswered(self, complete: bool | str) -> None:
        """Once the connection is over: each request owed an answer (`InvariantChecker.finish`'s `complete`) got one."""
        requests = list(self.requests.values())
        if complete == "read":
            answered = [i for i, r in enumerate(requests) if r.responses]
            requests = requests[: answered[-1]] if answered else []
        elif not complete:
            requests = []
        for request in requests:
            if not request.responses:
                self.findings.add("one_response_per_request", f"{request.method} #{request.record.message['id']!r} never got a response",
                                  [request.record])


class Negotiation:
    """The protocol version the connection negotiated (None until the agent answers `initialize`)
    and the schema its messages are validated against."""

    def __init__(self) -> None:
        self.protocol_version: Any = None
        self.schema = StreamChecker("agent")
        self.schema_notes: list[str] = []  # why some messages could not be validated (no schema for their version)
        self._schema_off = False
        # Whether the schema leaves a response's id to the id rules (ID_PROBLEMS), so one fault is
        # counted once: the probe's and the soak's verdicts; acp_green's own checks count both.
        self.leaves_ids = False

    @property
    def batches(self) -> bool:
        """Whether batch lines are JSON-RPC's (ACP v2) rather than refused (v1)."""
        return isinstance(self.protocol_version, int) and self.protocol_version >= 2

    def answered(self, request: SentRequest | None, message: dict[str, Any]) -> None:
        """On the answer to `initialize`, validate the connection against the schema of the version it negotiated."""
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
            self.schema.schema = schema
            if version != 1:
                self.schema_notes.append(f"a run negotiated protocolVersion {version}: validated against the ACP v{version} "
                                         "draft schema")

    def client_sent(self, message: Any) -> None:
        """Follow a message of the client (the schema reads an answer by the request it answers)."""
        self.schema.observe(message, from_sender=False)

    def agent_problems(self, message: dict[str, Any]) -> list[str] | None:
        """What the schema finds wrong in a message of the agent; None when no schema describes the
        version negotiated. With `leaves_ids`, a response's id is not the schema's to judge (ID_PROBLEMS)."""
        if self._schema_off:
            return None
        problems = self.schema.observe(message, from_sender=True)
        if self.leaves_ids and message_kind(message) == "response":
            problems = [p for p in problems if not p.startswith(ID_PROBLEMS)]
        return problems


class BatchLines:
    """A JSON-RPC batch line (an array), judged by the version negotiated: ACP v2 has batches,
    each member read as if it came alone; v1 refuses them."""

    def __init__(self, findings: Findings, version: Negotiation, requests: RequestLedger) -> None:
        self.findings = findings
        self._version = version
        self._requests = requests

    def client_batch(self, record: Record, batch: list[Any], read: Callable[[Record, Any], None]) -> None:
        """A batch the client wrote: each member `read` as if it came alone, or one error with id null owed."""
        if batch and self._version.batches:
            for member in batch:
                if isinstance(member, list):  # batches do not nest: such a member is answered -32600, id null
                    self._requests.null_budget += 1
                    continue
                read(Record(record.t, record.direction, record.raw, member), member)
        else:  # ACP v1 refuses any batch, and v2 an empty one: one error, id null
            self._requests.null_budget += 1

    def agent_line(self, record: Record, read: Callable[[Record, Any], None]) -> None:
        """A line the agent wrote, each message of it `read`; a batch's answer (v2) is an array of responses, each checked alone."""
        batch = record.message
        if not isinstance(batch, list):
            read(record, batch)
        elif batch and self._version.batches and all(message_kind(member) == "response" for member in batch):
            for member in batch:
                read(Record(record.t, record.direction, record.raw, member), member)
        else:
            self.findings.exercised["valid_json_rpc"] += 1
            why = ("an empty batch" if not batch else "a batch holding something other than responses" if self._version.batches
                   else "a batch (JSON array), which ACP v1 does not allow")
            self.findings.add("valid_json_rpc", f"the agent wrote a line that is {why}", [record])


class MessageChecks:
    """Checks on single messages of the agent: the paths it sends, the config options it shows a
    v1 client, its answer to a method nobody has."""

    def __init__(self, findings: Findings, version: Negotiation) -> None:
        self.findings = findings
        self._version = version
        self._shows_booleans = True  # False once the client's v1 `initialize` left out session.configOptions.boolean

    def client_initialize(self, params: dict[str, Any]) -> None:
        options = as_object(as_object(as_object(params.get("clientCapabilities")).get("session")).get("configOptions"))
        self._shows_booleans = "clientCapabilities" not in params or isinstance(options.get("boolean"), dict)

    def booleans_advertised(self, record: Record, message: dict[str, Any]) -> None:
        """ACP v1: a config option of type boolean only to a client that advertised
        `session.configOptions.boolean` (v2 needs no capability)."""
        if self._version.protocol_version != 1:
            return
        if message.get("method") == "session/update":
            options = as_object(as_object(message.get("params")).get("update")).get("configOptions")
        else:
            options = as_object(message.get("result")).get("configOptions")
        if not isinstance(options, list):
            return
        self.findings.exercised["capabilities_respected"] += 1
        if not self._shows_booleans and any(as_object(o).get("type") == "boolean" for o in options):
            self.findings.add("capabilities_respected", "a config option of type boolean to a client that did not advertise "
                              "session.configOptions.boolean", [record])

    def paths(self, record: Record, message: dict[str, Any]) -> None:
        """ACP: file paths the agent sends the client are absolute (a path that is no string is no path)."""
        for where, path in _sent_paths(message):
            self.findings.exercised["absolute_paths"] += 1
            if where.endswith("]"):  # a location that is no object: whatever it holds, it gives no path
                shown = json.dumps(path, default=repr)[:80]
                self.findings.add("absolute_paths", f"{message.get('method')} sent {where} = {shown}, not an object with a path",
                                  [record])
            elif not isinstance(path, str):
                shown = json.dumps(path, default=repr)[:80]
                self.findings.add("absolute_paths", f"{message.get('method')} sent {where} = {shown}, not an absolute path", [record])
            elif not path.startswith("/"):
                self.findings.add("absolute_paths", f"{message.get('method')} sent a relative path at {where}: {path!r}", [record])

    def unknown_method_answered(self, request: SentRequest, record: Record, message: dict[str, Any]) -> None:
        """ACP: a request for an unknown method should be answered -32601 (a SHOULD: an advisory)."""
        self.findings.exercised["unknown_method_not_found"] += 1
        error = message.get("error")
        if not (isinstance(error, dict) and error.get("code") == METHOD_NOT_FOUND):
            answer = f"error {error.get('code')!r}" if isinstance(error, dict) else f"result {json.dumps(message.get('result'), default=repr)[:60]}"
            self.findings.advise("unknown_method_not_found", f"{request.method}, a method no agent has, was answered with {answer}, "
                                 "not -32601", [request.record, record])


class LateTerminals:
    """Terminals the client created only after the agent gave up on them (`$/cancel_request`) or
    after their session went quiet: their kill and release may still follow."""

    def __init__(self, is_quiet: Callable[[str], bool]) -> None:
        self._is_quiet = is_quiet  # whether nothing more may come for a session (S5)
        self._creates: dict[IdKey | None, str] = {}  # the agent's terminal/create requests -> their session
        self._given_up: set[IdKey | None] = set()  # terminal/create requests the agent cancelled ($/cancel_request)
        self._late: set[tuple[str, str]] = set()  # (session, terminalId) created after the session went quiet

    def agent_request(self, message: dict[str, Any]) -> bool:
        """Follow a request of the agent; True for the late kill or release of such a terminal."""
        params = as_object(message.get("params"))
        session_id = params.get("sessionId")
        if message.get("method") == "terminal/create" and isinstance(session_id, str):
            self._creates[id_key(message.get("id"))] = session_id
        return message.get("method") in _LATE_CLEANUPS and (session_id, params.get("terminalId")) in self._late

    def agent_cancelled(self, message: dict[str, Any]) -> None:
        """The agent's `$/cancel_request`: a terminal/create it gives up on may be created late."""
        given_up = as_object(message.get("params")).get("requestId")
        if is_valid_id(given_up) and id_key(given_up) in self._creates:
            self._given_up.add(id_key(given_up))

    def client_answered(self, message: dict[str, Any]) -> None:
        """The client's answer to a terminal/create: a terminal made after the agent gave up on it
        or after its session went quiet may be killed and released late."""
        if not is_valid_id(message.get("id")):
            return
        key = id_key(message.get("id"))
        session_id = self._creates.pop(key, None)
        given_up = key in self._given_up
        self._given_up.discard(key)
        terminal_id = as_object(message.get("result")).get("terminalId")
        if session_id is not None and (given_up or self._is_quiet(session_id)) and isinstance(terminal_id, str):
            self._late.add((session_id, terminal_id))


def _sent_paths(message: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(where, value) for every file path in an agent's request or notification to the client.

    The value is what stands where a path must be, whatever it is: a location that is a bare
    string, or a path that is no string, is a malformed path, not an absent one."""
    params = as_object(message.get("params"))
    method = message.get("method")
    if method in ("fs/read_text_file", "fs/write_text_file") and "path" in params:
        yield "path", params["path"]
    elif method == "terminal/create" and params.get("cwd") is not None:
        yield "cwd", params["cwd"]
    tool = params.get("update") if method == "session/update" else params.get("toolCall") if method == "session/request_permission" else None
    if method == "session/request_permission" and tool is None:  # ACP v2: the tool call is the request's subject
        tool = as_object(params.get("subject")).get("toolCall")
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
                    yield f"content[{i}].changes[{j}].{name}", as_object(change).get(name)
        elif isinstance(block, dict) and block.get("type") == "diff":
            yield f"content[{i}].path", block.get("path")
