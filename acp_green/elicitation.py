"""Form elicitation (`elicitation/create`, mode "form"): asking the user for structured input within a turn.

ACP forbids asking in a mode the client did not advertise: a form needs
`clientCapabilities.elicitation.form` present and not null (`{}` advertises it; an empty
`elicitation` object advertises no mode). The request is the turn's like any other, so a
cancelled turn sends `$/cancel_request` for a pending one (client_requests.py). A form makes
nothing on the client that outlives its answer, so a late answer has nothing to release (unlike
a late `terminal/create`, terminals.py): it is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .rpc import wire
from .context import ConnectionSnapshot
from .errors import ClientError

METHOD = "elicitation/create"


def can_elicit_forms(snapshot: ConnectionSnapshot) -> bool:
    """The client advertised form elicitation (`elicitation.form` is an object)."""
    found = snapshot.client_capabilities.get("elicitation")
    return isinstance(found, Mapping) and isinstance(found.get("form"), Mapping)


@dataclass(frozen=True, slots=True)
class Elicited:
    """The user's answer: `accept` (with `content`), `decline` or `cancel` (or a client's own action)."""

    action: str
    content: Mapping[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"

    def __bool__(self) -> bool:
        return self.accepted


def form_params(session_id: str, message: str, schema: Mapping[str, Any], tool_call_id: str | None = None) -> dict[str, Any]:
    """`elicitation/create` params for a form scoped to the session (and a tool call, if given).

    `schema` is the form's flat JSON Schema object (`properties`, `required`, `title`...);
    `"type": "object"` is added when missing.
    """
    if not isinstance(message, str):
        raise TypeError("an elicitation's message must be a string")
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties", {}), Mapping):
        raise TypeError("an elicitation's schema must be an object whose 'properties' is an object")
    if schema.get("type", "object") != "object":
        raise ValueError("an elicitation's schema must have type 'object'")
    params: dict[str, Any] = {
        "mode": "form",
        "sessionId": session_id,
        "message": message,
        "requestedSchema": {"type": "object", **schema},
    }
    if tool_call_id is not None:
        params["toolCallId"] = tool_call_id
    return params


def elicited(result: Any) -> Elicited:
    """The client's answer, checked; a malformed one raises ClientError."""
    action = result.get("action") if isinstance(result, dict) else None
    if not isinstance(action, str):
        raise ClientError(METHOD, {"message": f"malformed result: {wire.describe(result)} without a string 'action'"})
    found = result.get("content")
    if action != "accept" or found is None:
        return Elicited(action)
    if not isinstance(found, dict):
        raise ClientError(METHOD, {"message": f"malformed result: content is {wire.describe(found)}, not an object"})
    return Elicited(action, found)
