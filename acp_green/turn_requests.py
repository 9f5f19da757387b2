"""What a turn asks the client (permission, files, forms), waiting cooperatively.

`Turn` (agent.py) holds one `TurnRequests` and delegates its asking methods to it. Every wait is
bound to the turn's token (or, for a permission, to the tool call's own), so cancelling the turn
releases it at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import content, paths, update_checks
from .context import ConnectionSnapshot
from .errors import CapabilityMissing, ClientError, TurnCancelled
from .rpc import wire
from .rpc.cancel import CancelToken
from .tool_call_tokens import ToolCallTokens
from .turn_output import ToolCallHandle, TurnOutput, tool_call_id_of, wire_fields

if TYPE_CHECKING:
    from .elicitation import Elicited

#: The options `Turn.ask_permission` offers unless told otherwise.
ALLOW_OR_REJECT: tuple[Mapping[str, str], ...] = (
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
)
_ALLOWING = frozenset({"allow_once", "allow_always"})


@dataclass(frozen=True, slots=True)
class Permission:
    """What `Turn.ask_permission` got: granted (with the option chosen), or why not.

    When not granted, the tool call was already marked `failed` with `reason`.
    """

    granted: bool
    option_id: str | None = None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.granted


class TurnRequests:
    """One turn's requests to its client; `Turn` documents each for the agent author."""

    def __init__(self, session_id: str, cwd: str, snapshot: ConnectionSnapshot, token: CancelToken,
                 call_client: Callable[..., Any], tool_calls: ToolCallTokens, output: TurnOutput) -> None:
        self._session_id = session_id
        self._cwd = cwd
        self._snapshot = snapshot
        self._token = token
        self._call_client = call_client
        self._tool_calls = tool_calls
        self._output = output  # a refused permission fails its tool call there

    def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """Send any request to the client and wait, released by the turn's token."""
        self._output.check_open("request")
        return self._call_client(method, params, token=self._token, timeout=timeout)

    def _check_cancelled(self) -> None:
        if self._token.is_set():
            raise TurnCancelled()

    def request_permission(self, tool_call: Mapping[str, Any], options: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """`session/request_permission`, released by the tool call's own token; always an outcome object."""
        where = "request_permission"
        self._output.check_open(where)
        checked = update_checks.tool_call_fields(where, tool_call, announce=False)
        params = {"sessionId": self._session_id, "toolCall": paths.tool_call_paths(checked, self._cwd),
                  "options": update_checks.permission_options(where, options)}
        try:
            result = self._call_client("session/request_permission", params, token=self._tool_calls.token(checked["toolCallId"]))
        except TurnCancelled:
            self._check_cancelled()  # the turn's own cancel ends the turn
            return {"outcome": "cancelled"}  # only the tool call was cancelled: nothing was granted
        outcome = result.get("outcome") if isinstance(result, dict) else result
        if outcome is None:
            return {"outcome": "cancelled"}
        if not isinstance(outcome, dict):
            # A malformed answer grants nothing; the agent code reads a dict either way.
            raise ClientError("session/request_permission", {"message": f"malformed result: the outcome is {wire.describe(outcome)}, not an object"})
        return outcome

    def ask_permission(self, tool_call: str | ToolCallHandle, options: Sequence[Mapping[str, Any]],
                       fields: Mapping[str, Any]) -> Permission:
        """Granted only for an offered `allow_*` option; any other answer fails the tool call with the reason."""
        self._output.check_open("ask_permission")
        tool_call_id = tool_call_id_of(tool_call)
        asked = {"toolCallId": tool_call_id, **wire_fields("ask_permission", fields)}
        where = "ask_permission"
        update_checks.tool_call_fields(where, asked, announce=False)  # a mistake raises here, not as a refusal
        update_checks.permission_options(where, options)
        try:
            outcome = self.request_permission(asked, options)
        except ClientError as exc:
            self._check_cancelled()
            return self._refused(tool_call_id, None, f"Permission request failed: {exc.explanation}")
        self._check_cancelled()
        answer = outcome.get("outcome")
        if answer == "cancelled":
            cancelled_here = self._tool_calls.token(tool_call_id).is_set()
            return self._refused(tool_call_id, None, "Cancelled" if cancelled_here else "Permission request cancelled by the client")
        if answer != "selected":
            return self._refused(tool_call_id, None, f"Permission denied: the client answered the outcome {wire.describe(answer)}")
        option_id = outcome.get("optionId")
        offered = next((o for o in options if o.get("optionId") == option_id), None)
        if offered is None:
            return self._refused(tool_call_id, None, f"Permission denied: the client selected {wire.describe(option_id)}, "
                                 "which was not offered")
        if offered.get("kind") in _ALLOWING:
            return Permission(True, option_id)
        return self._refused(tool_call_id, option_id, "Permission denied")

    def _refused(self, tool_call_id: str, option_id: str | None, reason: str) -> Permission:
        self._output.tool_update(tool_call_id, status="failed", content=[content.text(reason)])
        return Permission(False, option_id, reason)

    def read_text_file(self, path: str, *, line: int | None, limit: int | None) -> str:
        """`fs/read_text_file`; an answer without a string `content` is a ClientError, never an empty file."""
        self._output.check_open("read_text_file")
        if not self._snapshot.can_read_files():
            raise CapabilityMissing("the client did not advertise fs.readTextFile")
        params: dict[str, Any] = {"sessionId": self._session_id, "path": paths.resolve(self._cwd, path)}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        result = self.request("fs/read_text_file", params)
        # `null` or `{}` is not an empty file: the client said nothing about the file at all.
        if not isinstance(result, dict) or "content" not in result:
            raise ClientError("fs/read_text_file", {"message": f"malformed result: the client's answer has no content ({wire.describe(result)} without a 'content' string)"})
        text = result["content"]
        if not isinstance(text, str):
            raise ClientError("fs/read_text_file", {"message": f"malformed result: the client's answer has no content ('content' is {wire.describe(text)}, not a string)"})
        return text

    def write_text_file(self, path: str, text: str) -> None:
        """`fs/write_text_file`."""
        self._output.check_open("write_text_file")
        if not self._snapshot.can_write_files():
            raise CapabilityMissing("the client did not advertise fs.writeTextFile")
        self.request("fs/write_text_file", {"sessionId": self._session_id, "path": paths.resolve(self._cwd, path), "content": text})

    def elicit(self, message: str, schema: Mapping[str, Any], *, tool_call_id: str | None) -> Elicited:
        """`elicitation/create` in mode "form"."""
        self._output.check_open("elicit")
        from .elicitation import can_elicit_forms, elicited, form_params

        if not can_elicit_forms(self._snapshot):
            raise CapabilityMissing("the client did not advertise form elicitation (clientCapabilities.elicitation.form)")
        return elicited(self.request("elicitation/create", form_params(self._session_id, message, schema, tool_call_id)))
