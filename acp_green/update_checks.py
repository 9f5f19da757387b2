"""What agent code sends, checked against the shapes ACP requires before anything is sent.

A mistake in agent code (a location given as a bare int, a status ACP does not know, a content
item without its `type`) raises at the call site: TypeError for a value of the wrong type,
ValueError for a wrong value, each naming the call, the field path and what it takes, e.g.
"tool_call: locations[0] must be a path string or a ToolCallLocation {'path': str, 'line': int}
(content.location(path, line)), got 'int'". Nothing is sent
for a refused call. The enums are ACP v1's (schema.json: ToolKind, ToolCallStatus,
PlanEntryPriority, PlanEntryStatus, PermissionOptionKind, NoticeSeverity, CompactionStatus);
tests/agent/test_update_checks.py compares them with the schema the package ships. A notice's
severity and a compaction's status are open enums in ACP: besides the values it names, only an
implementation-specific one (starting with `_`) is accepted, as anything else is almost always a
misspelling (`"warn"`, `"done"`).

Objects may carry fields the schema does not name only where ACP lets them (`_meta`, and the
updates' own extra fields); a location or plan entry with a key ACP does not define is refused,
since that is almost always a misspelt `path`, `line` or `status`.
"""

from __future__ import annotations

import itertools
import os
import base64
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict, get_args

from .rpc import wire

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
PlanEntryPriority = Literal["high", "medium", "low"]
PlanEntryStatus = Literal["pending", "in_progress", "completed"]
PermissionOptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
NoticeSeverity = Literal["info", "warning", "error"]
CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]

TOOL_KINDS: frozenset[str] = frozenset(get_args(ToolKind))
TOOL_CALL_STATUSES: frozenset[str] = frozenset(get_args(ToolCallStatus))
PLAN_PRIORITIES: frozenset[str] = frozenset(get_args(PlanEntryPriority))
PLAN_STATUSES: frozenset[str] = frozenset(get_args(PlanEntryStatus))
PERMISSION_OPTION_KINDS: frozenset[str] = frozenset(get_args(PermissionOptionKind))
NOTICE_SEVERITIES: frozenset[str] = frozenset(get_args(NoticeSeverity))
COMPACTION_STATUSES: frozenset[str] = frozenset(get_args(CompactionStatus))

#: Every `sessionUpdate` kind of ACP v1 (stable and unstable schema); `send` refuses any other.
SESSION_UPDATE_KINDS = frozenset({
    "user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan",
    "plan_update", "plan_removed", "available_commands_update", "current_mode_update", "config_option_update",
    "session_info_update", "usage_update", "notice", "compaction_update", "compaction_summary_chunk",
    "session_message", "session_message_chunk", "subagent_update",
})
MESSAGE_CHUNKS = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk"})

_LOCATION_KEYS = frozenset({"path", "line", "_meta"})
#: What a tool call's location may be, as a refusal says it.
LOCATION_SHAPES = "a path string or a ToolCallLocation {'path': str, 'line': int} (content.location(path, line))"
_PLAN_ENTRY_KEYS = frozenset({"content", "priority", "status", "_meta"})
_BLOCK_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # type: (required string fields, optional string-or-null fields)
    "text": (("text",), ()),
    "image": (("data", "mimeType"), ("uri",)),
    "audio": (("data", "mimeType"), ()),
    "resource_link": (("uri", "name"), ("mimeType", "title", "description")),
    "resource": ((), ()),
}


class PlanEntry(TypedDict):
    """One entry of `Turn.plan` (ACP `PlanEntry`; `_meta` may be added)."""

    content: str
    priority: PlanEntryPriority
    status: PlanEntryStatus


def _got(value: Any) -> str:
    """How a refused value is named in a message: its type's name (never its content, which may be large)."""
    return repr(type(value).__name__)


def want_str(where: str, field: str, value: Any, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: {field} must be a string, got {_got(value)}")
    if not empty and not value:
        raise ValueError(f"{where}: {field} must not be empty")
    return value


def want_optional_str(where: str, field: str, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{where}: {field} must be a string or None, got {_got(value)}")


def _want_meta(where: str, field: str, value: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise TypeError(f"{where}: {field} must be an object (dict) or None, got {_got(value)}")


def _want_enum(where: str, field: str, value: Any, allowed: frozenset[str], order: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: {field} must be a string, got {_got(value)}")
    if value not in allowed:
        raise ValueError(f"{where}: {field} must be one of {', '.join(map(repr, order))}, got {wire.excerpt(value)!r}")
    return value


def _want_list(where: str, field: str, value: Any) -> Sequence[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(f"{where}: {field} must be a list, got {_got(value)}")
    return value


def _want_object(where: str, field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: {field} must be an object (dict), got {_got(value)}")
    return value


def _want_open_enum(where: str, field: str, value: Any, allowed: frozenset[str], order: tuple[str, ...]) -> str:
    """One of `allowed`, or an implementation-specific value: `_` and at least one more character."""
    if isinstance(value, str) and value.startswith("_") and len(value) > 1:
        return value
    if isinstance(value, str) and value not in allowed:
        raise ValueError(f"{where}: {field} must be one of {', '.join(map(repr, order))} or an extension value "
                         f"starting with '_', got {wire.excerpt(value)!r}")
    return _want_enum(where, field, value, allowed, order)


def tool_kind(where: str, value: Any, field: str = "kind") -> str:
    return _want_enum(where, field, value, TOOL_KINDS, get_args(ToolKind))


def tool_status(where: str, value: Any, field: str = "status") -> str:
    return _want_enum(where, field, value, TOOL_CALL_STATUSES, get_args(ToolCallStatus))


def line_number(where: str, field: str, value: Any) -> None:
    """A location's line: an int >= 0 (ACP's uint32) or None."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where}: {field} must be an int or None, got {_got(value)}")
    if not 0 <= value < 1 << 32:
        raise ValueError(f"{where}: {field} must be between 0 and 2**32-1, got {value}")


def location(where: str, field: str, value: Any) -> dict[str, Any]:
    """A location as ACP's object: a path string becomes `{"path": ...}`; anything else is refused."""
    if isinstance(value, str):
        return {"path": want_str(where, field, value, empty=False)}
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: {field} must be {LOCATION_SHAPES}, got {_got(value)}")
    if "path" not in value:
        keys = ", ".join(repr(wire.excerpt(str(k), 20)) for k in itertools.islice(value, 3))
        raise TypeError(f"{where}: {field} has no 'path' ({f'its keys: {keys}' if keys else 'it is empty'}): "
                        f"it must be {LOCATION_SHAPES}")
    unknown = sorted(str(k) for k in value if k not in _LOCATION_KEYS)
    if unknown:
        raise ValueError(f"{where}: {field} has {wire.excerpt(unknown[0])!r}, which a location has not (path, line, _meta)")
    want_str(where, f"{field}.path", value["path"], empty=False)
    line_number(where, f"{field}.line", value.get("line"))
    _want_meta(where, f"{field}._meta", value.get("_meta"))
    return dict(value)


def locations(where: str, value: Any, field: str = "locations") -> list[dict[str, Any]]:
    return [location(where, f"{field}[{i}]", item) for i, item in enumerate(_want_list(where, field, value))]


def content_block(where: str, field: str, value: Any) -> None:
    """An ACP `ContentBlock` (text, image, audio, resource_link, resource) with its required fields."""
    block = _want_object(where, field, value)
    kind = block.get("type")
    if kind not in _BLOCK_FIELDS:
        if not isinstance(kind, str):
            raise TypeError(f"{where}: {field}.type must be a string, got {_got(kind)}")
        raise ValueError(f"{where}: {field}.type must be one of {', '.join(map(repr, _BLOCK_FIELDS))}, got {wire.excerpt(kind)!r}")
    required, optional = _BLOCK_FIELDS[kind]
    for name in required:
        want_str(where, f"{field}.{name}", block.get(name))
    for name in optional:
        want_optional_str(where, f"{field}.{name}", block.get(name))
    if kind == "resource_link":
        size = block.get("size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
            raise TypeError(f"{where}: {field}.size must be an int or None, got {_got(size)}")
    if kind == "resource":
        resource = _want_object(where, f"{field}.resource", block.get("resource"))
        want_str(where, f"{field}.resource.uri", resource.get("uri"))
        if not (isinstance(resource.get("text"), str) or isinstance(resource.get("blob"), str)):
            raise TypeError(f"{where}: {field}.resource must hold a string 'text' or a string 'blob'")
    annotations = block.get("annotations")
    if annotations is not None:
        _want_object(where, f"{field}.annotations", annotations)
    _want_meta(where, f"{field}._meta", block.get("_meta"))


def tool_content_item(where: str, field: str, value: Any) -> None:
    """An ACP `ToolCallContent`: `content` (a ContentBlock), `diff` or `terminal`."""
    item = _want_object(where, field, value)
    kind = item.get("type")
    if kind == "content":
        content_block(where, f"{field}.content", item.get("content"))
    elif kind == "diff":
        want_str(where, f"{field}.path", item.get("path"), empty=False)
        want_str(where, f"{field}.newText", item.get("newText"))
        want_optional_str(where, f"{field}.oldText", item.get("oldText"))
    elif kind == "terminal":
        want_str(where, f"{field}.terminalId", item.get("terminalId"), empty=False)
    elif not isinstance(kind, str):
        raise TypeError(f"{where}: {field}.type must be a string, got {_got(kind)}")
    else:
        raise ValueError(f"{where}: {field}.type must be one of 'content', 'diff', 'terminal', got {wire.excerpt(kind)!r}")
    _want_meta(where, f"{field}._meta", item.get("_meta"))


def tool_content(where: str, value: Any, field: str = "content") -> list[Any]:
    items = list(_want_list(where, field, value))
    for i, item in enumerate(items):
        tool_content_item(where, f"{field}[{i}]", item)
    return items


def tool_call_fields(where: str, update: Any, *, announce: bool) -> dict[str, Any]:
    """A `tool_call` (`announce`) or `tool_call_update`/permission `toolCall` object as it goes on
    the wire: checked, with locations normalised to objects. A new dict; `update` is not changed."""
    checked = dict(_want_object(where, "tool_call", update))
    want_str(where, "toolCallId", checked.get("toolCallId"), empty=False)
    if announce or checked.get("title") is not None:
        want_str(where, "title", checked.get("title"))
    if announce or checked.get("kind") is not None:
        tool_kind(where, checked.get("kind", "other"))
    if announce or checked.get("status") is not None:
        tool_status(where, checked.get("status", "pending"))
    want_optional_str(where, "name", checked.get("name"))
    if checked.get("content") is not None:
        checked["content"] = tool_content(where, checked["content"])
    if checked.get("locations") is not None:
        checked["locations"] = locations(where, checked["locations"])
    _want_meta(where, "_meta", checked.get("_meta"))
    return checked


def plan_entries(where: str, value: Any) -> list[dict[str, Any]]:
    """A complete plan's entries, each an ACP `PlanEntry`, as fresh dicts."""
    entries = []
    for i, entry in enumerate(_want_list(where, "entries", value)):
        field = f"entries[{i}]"
        entry = _want_object(where, field, entry)
        unknown = sorted(str(k) for k in entry if k not in _PLAN_ENTRY_KEYS)
        if unknown:
            raise ValueError(f"{where}: {field} has {wire.excerpt(unknown[0])!r}, which a plan entry has not "
                             "(content, priority, status, _meta)")
        want_str(where, f"{field}.content", entry.get("content"))
        _want_enum(where, f"{field}.priority", entry.get("priority"), PLAN_PRIORITIES, get_args(PlanEntryPriority))
        _want_enum(where, f"{field}.status", entry.get("status"), PLAN_STATUSES, get_args(PlanEntryStatus))
        _want_meta(where, f"{field}._meta", entry.get("_meta"))
        entries.append(dict(entry))
    return entries


def permission_options(where: str, value: Any) -> list[dict[str, Any]]:
    """The options of a permission request, each an ACP `PermissionOption`."""
    options = []
    for i, option in enumerate(_want_list(where, "options", value)):
        field = f"options[{i}]"
        option = _want_object(where, field, option)
        want_str(where, f"{field}.optionId", option.get("optionId"), empty=False)
        want_str(where, f"{field}.name", option.get("name"))
        _want_enum(where, f"{field}.kind", option.get("kind"), PERMISSION_OPTION_KINDS, get_args(PermissionOptionKind))
        options.append(dict(option))
    return options


def notice_fields(where: str, update: Any) -> dict[str, Any]:
    """A `notice` update (ACP `Notice`): a severity, a non-empty title, an optional description."""
    checked = dict(_want_object(where, "update", update))
    _want_open_enum(where, "severity", checked.get("severity"), NOTICE_SEVERITIES, get_args(NoticeSeverity))
    want_str(where, "title", checked.get("title"), empty=False)
    want_optional_str(where, "description", checked.get("description"))
    _want_meta(where, "_meta", checked.get("_meta"))
    return checked


def compaction_id(where: str, value: Any, field: str = "compactionId") -> str:
    return want_str(where, field, value, empty=False)


def compaction_update_fields(where: str, update: Any) -> dict[str, Any]:
    """A `compaction_update` (ACP `CompactionUpdate`): its id and status; a summary (a list of
    content blocks, `[]` clearing it) and an error text when given."""
    checked = dict(_want_object(where, "update", update))
    compaction_id(where, checked.get("compactionId"))
    _want_open_enum(where, "status", checked.get("status"), COMPACTION_STATUSES, get_args(CompactionStatus))
    summary = checked.get("summary")
    if summary is not None:
        blocks = list(_want_list(where, "summary", summary))
        for i, block in enumerate(blocks):
            content_block(where, f"summary[{i}]", block)
        checked["summary"] = blocks
    want_optional_str(where, "error", checked.get("error"))
    _want_meta(where, "_meta", checked.get("_meta"))
    return checked


def compaction_chunk_fields(where: str, update: Any) -> dict[str, Any]:
    """A `compaction_summary_chunk` (ACP `CompactionSummaryChunk`): its compaction's id and one content block."""
    checked = dict(_want_object(where, "update", update))
    compaction_id(where, checked.get("compactionId"))
    content_block(where, "content", checked.get("content"))
    _want_meta(where, "_meta", checked.get("_meta"))
    return checked


def _want_json(where: str, update: dict[str, Any]) -> dict[str, Any]:
    """`update` as it is, if it encodes as JSON (a `_meta` or a block may hold anything: a NaN, a
    set, a cycle). Checked here, not only when the line is built, because a notice or compaction
    for a client that did not advertise it is never built: the same call must raise for every client."""
    try:
        wire.encode_json(update)
    except TypeError as exc:
        raise TypeError(f"{where}: not JSON: {exc}") from None
    except (ValueError, OverflowError) as exc:  # NaN or infinity, a number too large, nesting too deep
        raise ValueError(f"{where}: not JSON: {exc}") from None
    return update


_FIELD_CHECKS = {
    "notice": notice_fields,
    "compaction_update": compaction_update_fields,
    "compaction_summary_chunk": compaction_chunk_fields,
}


def session_update(where: str, update: Any) -> dict[str, Any]:
    """Any `session/update` payload agent code sends: its kind known to ACP, and the kinds agent
    code builds by hand (tool calls, plans, message chunks) checked field by field."""
    update = _want_object(where, "update", update)
    kind = update.get("sessionUpdate")
    if not isinstance(kind, str):
        raise TypeError(f"{where}: sessionUpdate must be a string, got {_got(kind)}")
    if kind not in SESSION_UPDATE_KINDS:
        raise ValueError(f"{where}: sessionUpdate {wire.excerpt(kind)!r} is not an ACP session update")
    if kind in ("tool_call", "tool_call_update"):
        return {**tool_call_fields(where, update, announce=kind == "tool_call"), "sessionUpdate": kind}
    if kind == "plan":
        return {**update, "entries": plan_entries(where, update.get("entries"))}
    if kind in _FIELD_CHECKS:
        return _want_json(where, _FIELD_CHECKS[kind](where, update))
    if kind in MESSAGE_CHUNKS:
        content_block(where, "content", update.get("content"))
    return dict(update)


# -- tool call ids ---------------------------------------------------------------------------------

#: Unique to this process (48 random bits): generated ids never repeat one from before a restart,
#: whose tool calls a loaded session's history may still show.
PROCESS_TAG = base64.urlsafe_b64encode(os.urandom(6)).decode("ascii")
_numbers = itertools.count(1)


def new_tool_call_id() -> str:
    """A tool call id no other tool call of this process, nor of an earlier one, has had."""
    return f"call_{PROCESS_TAG}_{next(_numbers)}"


def new_compaction_id() -> str:
    """A compaction id no other compaction of this process, nor of an earlier one, has had."""
    return f"compaction_{PROCESS_TAG}_{next(_numbers)}"
