"""ACP v2 (draft) as a dialect: pure functions from v1 shapes to v2's.

The protocol layer builds in ACP v1's terms; history is stored in v1's shape. Once `initialize`
negotiated version 2, `V2Dialect` reshapes what handlers read and answer (the endpoint's
`dialect`), and the connection's outgoing dialect (dialect.py) builds each update and request
we send in v2's shape with these functions, where it is made. What v2 has no
place for is dropped with a debug log (docs/V2.md lists it): `current_mode_update` and the
`modes` of a session's answers (v2 has no modes; settings.py offers them as the `mode` option).

Message ids: v2 requires one on every message chunk. A turn's chunks carry theirs already
(turn_record.py); a stored chunk written before ids existed gets `legacy` (replay only).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping
from typing import Any

from ..rpc import wire

log = logging.getLogger(__name__)

VERSION = 2

#: The versions a route of only one of them serves (`Route.versions`): v1's methods the v2 draft
#: removed answer -32601 under v2 (`session/load` is `session/resume` with `replayFrom`;
#: `authenticate` and `logout` are `auth/login|logout`), v2's new ones -32601 under v1.
V1_ONLY = frozenset({1})
V2_ONLY = frozenset({VERSION})

#: v1's unstable session capabilities v2's unstable schema keeps (same names, same shapes; archive
#: closes a running session as session/close does): advertised under v2 when v1 advertises them.
UNSTABLE_SESSION_CAPABILITIES = ("fork", "archive", "status", "title")

MESSAGE_CHUNKS = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk"})
#: The one plan a v1 agent keeps per session, as v2's plan id.
PLAN_ID = "plan"
LEGACY_MESSAGE_ID = "legacy"

#: Kinds whose v2 shape differs from v1's (a message chunk only when it lacks its messageId);
#: every other kind is sent as v1 shapes it.
RESHAPED = frozenset({"tool_call", "tool_call_update", "plan", "available_commands_update", "config_option_update",
                      "current_mode_update"})


# -- what the agent sends -------------------------------------------------------------------------
def update(v1: Mapping[str, Any]) -> dict[str, Any] | None:
    """One v1 `session/update` update as v2's; None when v2 has no such update (dropped)."""
    kind = v1.get("sessionUpdate")
    if kind in MESSAGE_CHUNKS:
        return dict(v1) if "messageId" in v1 else {**v1, "messageId": LEGACY_MESSAGE_ID}
    if kind in ("tool_call", "tool_call_update"):
        return {**tool_call(v1), "sessionUpdate": "tool_call_update"}
    if kind == "plan":
        return {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": PLAN_ID, "entries": v1.get("entries", [])}}
    if kind == "available_commands_update":
        return {"sessionUpdate": kind, "availableCommands": commands(v1.get("availableCommands", []))}
    if kind == "config_option_update":
        return {**v1, "configOptions": config_options(v1.get("configOptions", []))}
    if kind == "current_mode_update":
        log.debug("current_mode_update not sent: ACP v2 has no session modes")
        return None
    return dict(v1)


def tool_call(v1: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 tool call or tool call update as v2's ToolCallUpdate (without its `sessionUpdate`)."""
    out = {k: v for k, v in v1.items() if k != "sessionUpdate"}
    content = v1.get("content")
    if isinstance(content, list):
        out["content"] = [tool_content(item) for item in content]
    locations = v1.get("locations")
    if isinstance(locations, list):
        out["locations"] = [location(item) for item in locations]
    return out


def tool_content(item: Any) -> Any:
    """A v1 ToolCallContent as v2's: a diff becomes structured changes plus a git patch."""
    if not isinstance(item, Mapping) or item.get("type") != "diff":
        return item
    path, old, new = item.get("path"), item.get("oldText"), item.get("newText")
    if not isinstance(path, str) or not isinstance(new, str) or not (old is None or isinstance(old, str)):
        return item  # not a v1 diff this runtime checked: sent as it is
    diff: dict[str, Any] = {"type": "diff", "changes": [{"operation": "add" if old is None else "modify", "path": path,
                                                           "fileType": "text"}]}
    diff["patch"] = {"format": "git_patch", "text": git_patch(path, old, new)}
    return diff


def git_patch(path: str, old: str | None, new: str) -> str:
    """One `diff --git` section with absolute paths and no a/ b/ prefixes (v2's DiffPatchFormat)."""
    head = [f"diff --git {path} {path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    body = difflib.unified_diff(_lines(old or ""), _lines(new), "/dev/null" if old is None else path, path)
    return "".join(head) + "".join(body)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def location(item: Any) -> Any:
    """A v1 location as v2's: v2 lines are 1-based, so a line 0 is left out."""
    if isinstance(item, Mapping) and item.get("line") == 0:
        return {k: v for k, v in item.items() if k != "line"}
    return item


def commands(v1: Any) -> Any:
    """v1 AvailableCommands as v2's: each a `command`, its input `text`."""
    if not isinstance(v1, list):
        return v1
    out = []
    for command in v1:
        if isinstance(command, Mapping):
            command = {"type": "command", **command}
            if isinstance(command.get("input"), Mapping) and "type" not in command["input"]:
                command["input"] = {"type": "text", **command["input"]}
        out.append(command)
    return out


def config_options(v1: Any) -> Any:
    """v1 SessionConfigOptions as v2's: `id` is `configId`."""
    if not isinstance(v1, list):
        return v1
    return [{("configId" if k == "id" else k): v for k, v in o.items()} if isinstance(o, Mapping) else o for o in v1]


def permission_request(v1: Mapping[str, Any]) -> dict[str, Any]:
    """`session/request_permission` params as v2's: a title, and the tool call as its subject."""
    out = {k: v for k, v in v1.items() if k != "toolCall"}
    call = v1.get("toolCall")
    if isinstance(call, Mapping):
        title = call.get("title")
        out["title"] = title if isinstance(title, str) and title else "Permission requested"
        out["subject"] = {"type": "tool_call", "toolCall": tool_call(call)}
    else:
        out.setdefault("title", "Permission requested")
    return out


def state_update(state: str, stop_reason: str | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `state_update`: `running`, or `idle` with the stop reason of the work it ends."""
    out: dict[str, Any] = {"sessionUpdate": "state_update", "state": state}
    if stop_reason is not None:
        out["stopReason"] = stop_reason
    if error is not None:
        out["error"] = error
    return out


def user_message(message_id: str, prompt: list[dict[str, Any]]) -> dict[str, Any]:
    """The echo of an inserted prompt: the user message with the id its acknowledgement gave."""
    return {"sessionUpdate": "user_message", "messageId": message_id, "content": prompt}


# -- what the client sends and what it is answered ------------------------------------------------
def auth_methods(v1: Any) -> Any:
    """v1 AuthMethods as v2's: `methodId`, and the `agent` type v1 left implicit."""
    if not isinstance(v1, list):
        return v1
    return [{"type": "agent", **{("methodId" if k == "id" else k): v for k, v in m.items()}} if isinstance(m, Mapping) else m
            for m in v1]


def agent_capabilities(v1: Mapping[str, Any]) -> dict[str, Any]:
    """v1 agentCapabilities as v2's AgentCapabilities: everything about sessions under `session`
    (v2's `auth` object advertises nothing v1's logout capability says: auth/logout comes with
    a non-empty `authMethods`).

    v2's baseline (`session: {}`) is new, list, resume, close, prompt, cancel and update; load is
    gone (resume with replayFrom). MCP transports and prompt content are objects, not booleans."""
    prompt = v1.get("promptCapabilities", {})
    mcp = v1.get("mcpCapabilities", {})
    sessions = v1.get("sessionCapabilities", {})
    session: dict[str, Any] = {
        "prompt": {name: {} for name in ("image", "audio", "embeddedContext") if prompt.get(name) is True},
        "mcp": {"stdio": {}, **({"http": {}} if mcp.get("http") is True else {})},
    }
    for name in ("delete", "additionalDirectories", *UNSTABLE_SESSION_CAPABILITIES):
        if name in sessions:
            session[name] = {}
    return {"session": session}


def initialize_result(v1: Mapping[str, Any]) -> dict[str, Any]:
    """The v1 `initialize` answer as v2's: `info`, `capabilities`, `authMethods`."""
    out: dict[str, Any] = {
        "protocolVersion": VERSION,
        "info": v1.get("agentInfo"),
        "capabilities": agent_capabilities(v1.get("agentCapabilities", {})),
        "authMethods": auth_methods(v1.get("authMethods", [])),
    }
    if "_meta" in v1:
        out["_meta"] = v1["_meta"]
    return out


def session_answer(v1: Mapping[str, Any]) -> dict[str, Any]:
    """A session/new, resume or fork answer: config options as v2's; v2 has no modes."""
    out = {k: v for k, v in v1.items() if k != "modes"}
    if "configOptions" in out:
        out["configOptions"] = config_options(out["configOptions"])
    return out


def session_list(v1: Mapping[str, Any]) -> dict[str, Any]:
    """session/list's answer: v2's SessionInfo has no archive state."""
    sessions = v1.get("sessions")
    if not isinstance(sessions, list):
        return dict(v1)
    return {**v1, "sessions": [{k: v for k, v in s.items() if k != "archived"} if isinstance(s, Mapping) else s for s in sessions]}


_RESULTS = {
    "initialize": initialize_result,
    "session/new": session_answer,
    "session/resume": session_answer,
    "session/fork": session_answer,
    "session/list": session_list,
    "session/set_config_option": session_answer,
}


class V2Dialect:
    """The endpoint's view of a v2 client: what handlers read, what the client is answered."""

    def params(self, method: str, params: Any) -> Any:
        """v2 lets `mcpServers` be left out of session/new (v1 requires it)."""
        if method == "session/new" and isinstance(params, dict) and params.get("mcpServers") is None:
            return {**params, "mcpServers": []}
        return params

    def result(self, method: str, result: Any) -> Any:
        reshape = _RESULTS.get(method)
        if reshape is None or not isinstance(result, Mapping):
            return result
        return reshape(result)


def encode(session_id: str, update_: dict[str, Any]) -> bytes:
    """A v2-only `session/update` line (state updates, the user message echo)."""
    return wire.encode_notification("session/update", {"sessionId": session_id, "update": update_})
