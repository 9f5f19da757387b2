"""What agent code sends is checked at the call site: a location, kind, status, plan entry or
content item ACP would not accept raises TypeError/ValueError naming the call and the field, and
nothing reaches the wire; keyword arguments are snake_case (`raw_input` goes out as `rawInput`).

The validators' boundaries are property-tested (update_checks.py); the turn's methods are driven
through the unit layer, where every line the agent writes is recorded."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import content, update_checks
from acp_green.sessions import ToolCallIds
from acp_green.agent import Agent, Turn
from tests.helpers import wait_until
from tests.unit_harness import UnitConnection

SCHEMA = Path(update_checks.__file__).parent / "schema" / "schema.json"
CWD = "/work/project"


def schema_enum(name: str) -> set[str]:
    definitions = json.loads(SCHEMA.read_text())["$defs"]
    return {choice["const"] for choice in definitions[name]["oneOf"]}


@pytest.mark.parametrize("alias, name", [
    (update_checks.ToolKind, "ToolKind"), (update_checks.ToolCallStatus, "ToolCallStatus"),
    (update_checks.PlanEntryPriority, "PlanEntryPriority"), (update_checks.PlanEntryStatus, "PlanEntryStatus"),
    (update_checks.PermissionOptionKind, "PermissionOptionKind"),
])
def test_the_enums_are_the_schemas(alias: Any, name: str) -> None:
    """The values the checks accept are exactly the ACP schema's enum of that name."""
    assert set(get_args(alias)) == schema_enum(name)


def open_enum(name: str) -> set[str]:
    """The named values of an open ACP enum (an `anyOf` of consts and one free-form string)."""
    definitions = json.loads(SCHEMA.read_text())["$defs"]
    return {choice["const"] for choice in definitions[name]["anyOf"] if "const" in choice}


def test_send_knows_every_session_update_kind_of_the_stable_and_unstable_schemas() -> None:
    """`send` refuses a kind neither vendored schema names, and no kind either names."""
    kinds: set[str] = set()
    for name in ("schema.json", "schema.unstable.json"):
        definitions = json.loads((SCHEMA.parent / name).read_text())["$defs"]
        kinds |= {branch["properties"]["sessionUpdate"]["const"] for branch in definitions["SessionUpdate"]["oneOf"]}
    assert update_checks.SESSION_UPDATE_KINDS == kinds


@pytest.mark.parametrize("alias, name", [(update_checks.NoticeSeverity, "NoticeSeverity"),
                                         (update_checks.CompactionStatus, "CompactionStatus")])
def test_the_open_enums_name_the_schemas_values(alias: Any, name: str) -> None:
    """A notice's severity and a compaction's status: the named values are exactly the schema's."""
    assert set(get_args(alias)) == open_enum(name)


# -- the validators' boundaries (property-based) ----------------------------------------------------

not_a_location = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), st.binary(),
    st.lists(st.text(max_size=3), max_size=2), st.tuples(st.text(max_size=3)),
    st.dictionaries(st.sampled_from(["file", "name", "line"]), st.text(max_size=3), max_size=2),  # no 'path'
)
path_text = st.text(min_size=1, max_size=40)
line = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=200, deadline=None)
@given(before=st.lists(path_text, max_size=3), bad=not_a_location)
def test_a_location_neither_a_path_string_nor_an_object_with_a_path_is_refused_naming_its_index(before, bad):
    with pytest.raises(TypeError) as refused:
        update_checks.locations("tool_call", [*before, bad])
    field = f"tool_call: locations[{len(before)}]"
    if isinstance(bad, dict):  # an object without its path: its keys are named, and what a location is
        keys = ", ".join(map(repr, bad))
        assert str(refused.value) == (f"{field} has no 'path' ({f'its keys: {keys}' if keys else 'it is empty'}): "
                                      f"it must be {update_checks.LOCATION_SHAPES}")
    else:
        assert str(refused.value) == f"{field} must be {update_checks.LOCATION_SHAPES}, got {type(bad).__name__!r}"


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.one_of(path_text, st.builds(lambda p, n: {"path": p, "line": n}, path_text, line),
                                st.builds(lambda p: {"path": p}, path_text)), max_size=5))
def test_path_strings_and_path_objects_come_out_as_location_objects(items):
    out = update_checks.locations("tool_call", items)
    assert out == [{"path": i} if isinstance(i, str) else i for i in items]
    assert all(o is not i for o, i in zip(out, items))  # fresh objects: the agent's are never changed


@settings(max_examples=200, deadline=None)
@given(bad=st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32), st.booleans(),
                     st.floats(allow_nan=False), st.text(max_size=3)))
def test_a_line_outside_uint32_or_not_an_int_is_refused(bad):
    expected = ValueError if isinstance(bad, int) and not isinstance(bad, bool) else TypeError
    with pytest.raises(expected, match=r"^tool_call: locations\[0\]\.line must be"):
        update_checks.locations("tool_call", [{"path": "a.txt", "line": bad}])
    with pytest.raises(expected, match=r"^location: line must be"):
        content.location("a.txt", bad)


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=20))
def test_kinds_and_statuses_are_exactly_the_schemas(value):
    for check, allowed in ((update_checks.tool_kind, update_checks.TOOL_KINDS),
                           (update_checks.tool_status, update_checks.TOOL_CALL_STATUSES)):
        if value in allowed:
            assert check("tool_update", value) == value
        else:
            with pytest.raises(ValueError, match=r"^tool_update: (kind|status) must be one of "):
                check("tool_update", value)


@settings(max_examples=200, deadline=None)
@given(priority=st.text(max_size=8), status=st.text(max_size=12), at=st.integers(0, 2))
def test_plan_entries_take_only_the_schemas_priorities_and_statuses(priority, status, at):
    entries = [{"content": "step", "priority": "low", "status": "pending"} for _ in range(3)]
    entries[at] = {"content": "step", "priority": priority, "status": status}
    if priority in update_checks.PLAN_PRIORITIES and status in update_checks.PLAN_STATUSES:
        assert update_checks.plan_entries("plan", entries) == entries
    else:
        with pytest.raises(ValueError, match=rf"^plan: entries\[{at}\]\.(priority|status) must be one of "):
            update_checks.plan_entries("plan", entries)


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(st.integers(), st.none(), st.binary(), st.lists(st.text(max_size=2), max_size=2)))
def test_content_helpers_refuse_what_is_not_a_string(value):
    for call, message in ((lambda: content.text(value), "text: value"), (lambda: content.diff(value, "new"), "diff: path"),
                          (lambda: content.diff("a.py", value), "diff: new_text"), (lambda: content.location(value), "location: path"),
                          (lambda: content.terminal(value), "terminal: term")):
        with pytest.raises(TypeError, match=f"^{message}"):
            call()


@pytest.mark.parametrize("item, message", [
    ({"type": "content", "content": {"type": "text", "text": 5}}, "content[0].content.text must be a string, got 'int'"),
    ({"type": "content", "content": {"type": "resource_link", "uri": "file:///a"}}, "content[0].content.name must be a string"),
    ({"type": "content", "content": {"type": "picture"}}, "content[0].content.type must be one of 'text', 'image'"),
    ({"type": "diff", "path": "a.py"}, "content[0].newText must be a string, got 'NoneType'"),
    ({"type": "terminal"}, "content[0].terminalId must be a string"),
    ({"type": "text", "text": "a bare block, not a tool call content item"}, "content[0].type must be one of 'content', 'diff', 'terminal'"),
    ("just text", "content[0] must be an object (dict), got 'str'"),
])
def test_tool_call_content_items_are_checked_by_their_type(item, message):
    with pytest.raises((TypeError, ValueError)) as refused:
        update_checks.tool_content("tool_update", [item])
    assert str(refused.value).startswith(f"tool_update: {message}"), refused.value


def test_the_memory_of_a_sessions_ids_is_bounded_forgetting_the_oldest():
    ids = ToolCallIds()
    for n in range(ids.LIMIT + 1):
        ids.announce("tool_call", f"t{n}")
    assert len(ids) == ids.LIMIT and "t0" not in ids and f"t{ids.LIMIT}" in ids
    ids.announce("tool_call", "t0")  # forgotten, so no longer refused
    with pytest.raises(ValueError, match="'t5' was already used in this session"):
        ids.announce("tool_call", "t5")


# -- at the call site, through a turn ---------------------------------------------------------------


class RunsActionsAgent(Agent):
    """Each prompt's text names an action the test registered; what it raised is kept, and the
    turn ends normally, so a test sees exactly what reached the wire before and after."""

    name = "runs-actions"

    def __init__(self) -> None:
        self.actions: dict[str, Callable[[Turn], Any]] = {}
        self.raised: dict[str, BaseException] = {}
        self.returned: dict[str, Any] = {}

    def prompt(self, turn: Turn) -> str:
        try:
            self.returned[turn.text] = self.actions[turn.text](turn)
        except (TypeError, ValueError) as exc:
            self.raised[turn.text] = exc
        return "end_turn"


TOOL_UPDATES = ("tool_call", "tool_call_update", "plan", "notice", "compaction_update", "compaction_summary_chunk")


def run(conn: UnitConnection, agent: RunsActionsAgent, session_id: str, name: str, action: Callable[[Turn], Any]) -> list[dict[str, Any]]:
    """Run `action` as one turn; the tool call and plan updates it sent."""
    agent.actions[name] = action
    before = len(conn.sink.updates(session_id))
    assert conn.result(conn.prompt(session_id, name)) == {"stopReason": "end_turn"}
    return [u for u in conn.sink.updates(session_id)[before:] if u["sessionUpdate"] in TOOL_UPDATES]


@pytest.fixture
def turns(unit):
    agent = RunsActionsAgent()
    conn: UnitConnection = unit(agent)
    # Notices and compaction advertised: a refused call sends nothing because of its check alone.
    conn.initialize(capabilities={"fs": {"readTextFile": True, "writeTextFile": True},
                                  "session": {"notices": {}, "compaction": {}}})
    return conn, agent, conn.new_session(cwd=CWD)


REFUSED_CALLS: list[tuple[str, Callable[[Turn], Any], type[Exception], str]] = [
    ("location int", lambda t: t.tool_call("t1", "Read", locations=[3]), TypeError,
     "tool_call: locations[0] must be a path string or a ToolCallLocation {'path': str, 'line': int} "
     "(content.location(path, line)), got 'int'"),
    ("location key", lambda t: t.tool_call("t1", "Read", locations=[{"file": "a"}]), TypeError,
     "tool_call: locations[0] has no 'path' (its keys: 'file'): it must be a path string or a ToolCallLocation "
     "{'path': str, 'line': int} (content.location(path, line))"),
    ("location typo", lambda t: t.tool_call("t1", "Read", locations=[{"path": "a", "lines": 3}]), ValueError,
     "tool_call: locations[0] has 'lines', which a location has not (path, line, _meta)"),
    ("kind", lambda t: t.tool_call("t1", "Read", kind="reading"), ValueError, "tool_call: kind must be one of 'read', "),
    ("status", lambda t: t.tool_update("t1", status="done"), ValueError, "tool_update: status must be one of 'pending', "),
    ("camel", lambda t: t.tool_call("t1", "Read", rawInput={}), TypeError,
     "tool_call: unexpected keyword argument 'rawInput' (did you mean raw_input?)"),
    ("no title", lambda t: t.tool_call("t1", 5), TypeError, "tool_call: title must be a string, got 'int'"),
    ("plan", lambda t: t.plan([{"content": "x", "priority": "urgent", "status": "pending"}]), ValueError,
     "plan: entries[0].priority must be one of 'high', 'medium', 'low', got 'urgent'"),
    ("send kind", lambda t: t.send({"sessionUpdate": "tool_progress", "toolCallId": "t1"}), ValueError,
     "send: sessionUpdate 'tool_progress' is not an ACP session update"),
    ("send content", lambda t: t.send({"sessionUpdate": "agent_message_chunk", "content": "hi"}), TypeError,
     "send: content must be an object (dict), got 'str'"),
    ("send locations", lambda t: t.send({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "R", "locations": "a.txt"}),
     TypeError, "send: locations must be a list, got 'str'"),
    ("tool name", lambda t: t.tool_call("t1", "Read", name=7), TypeError, "tool_call: name must be a string or None, got 'int'"),
    ("update name", lambda t: t.tool_update("t1", name=["x"]), TypeError, "tool_update: name must be a string or None, got 'list'"),
    ("notice severity", lambda t: t.notice("Hi", severity="warn"), ValueError,
     "notice: severity must be one of 'info', 'warning', 'error' or an extension value starting with '_', got 'warn'"),
    ("notice title", lambda t: t.notice(""), ValueError, "notice: title must not be empty"),
    ("notice description", lambda t: t.notice("Hi", description=3), TypeError, "notice: description must be a string or None, got 'int'"),
    ("send notice", lambda t: t.send({"sessionUpdate": "notice", "title": "Hi"}), TypeError, "send: severity must be a string, got 'NoneType'"),
    ("compaction status", lambda t: t.compaction("done"), ValueError,
     "compaction_update: status must be one of 'in_progress', 'completed', 'failed', 'cancelled' or an extension value"),
    ("compaction summary", lambda t: t.compaction(summary="all of it"), TypeError, "compaction_update: summary must be a list, got 'str'"),
    ("compaction block", lambda t: t.compaction(summary=[{"text": "x"}]), TypeError, "compaction_update: summary[0].type must be a string"),
    ("compaction error", lambda t: t.compaction("failed", error=404), TypeError, "compaction_update: error must be a string or None, got 'int'"),
    ("compaction id", lambda t: t.compaction(compaction_id=""), ValueError, "compaction_update: compactionId must not be empty"),
    ("summary chunk", lambda t: t.compaction_summary("c1", {"type": "txt"}), ValueError,
     "compaction_summary: content.type must be one of 'text', "),
    ("summary chunk id", lambda t: t.compaction_summary(5, "x"), TypeError, "compaction_summary: compactionId must be a string, got 'int'"),
    ("notice meta nan", lambda t: t.notice("Hi", meta={"x": math.nan}), ValueError, "notice: not JSON: "),
    ("notice meta set", lambda t: t.notice("Hi", meta={"x": {1}}), TypeError, "notice: not JSON: "),
    ("compaction meta deep", lambda t: t.compaction(meta=_nested(5000)), ValueError, "compaction_update: not JSON: "),
    ("summary chunk meta", lambda t: t.compaction_summary("c1", {"type": "text", "text": "x", "_meta": {"x": math.inf}}), ValueError,
     "compaction_summary: not JSON: "),
]


def _nested(depth: int) -> dict[str, Any]:
    """An object nested `depth` levels deep (deeper than the JSON encoder goes)."""
    nested: dict[str, Any] = {}
    for _ in range(depth):
        nested = {"x": nested}
    return nested


@pytest.mark.parametrize("name, action, error, message", REFUSED_CALLS, ids=[c[0] for c in REFUSED_CALLS])
def test_a_refused_call_raises_at_the_call_site_and_sends_nothing(turns, name, action, error, message):
    conn, agent, session_id = turns
    assert run(conn, agent, session_id, name, action) == []
    assert type(agent.raised[name]) is error and str(agent.raised[name]).startswith(message), agent.raised[name]


def test_a_permission_request_with_a_bad_location_raises_and_asks_nothing(turns):
    """The permission request carries the tool call's fields: they are checked before it is sent."""
    conn, agent, session_id = turns
    assert run(conn, agent, session_id, "ask", lambda t: t.ask_permission("t1", title="Write", locations=[7])) == []
    assert str(agent.raised["ask"]) == f"ask_permission: locations[0] must be {update_checks.LOCATION_SHAPES}, got 'int'"
    assert run(conn, agent, session_id, "raw", lambda t: t.request_permission({"toolCallId": "t1", "kind": "writing"}, [])) == []
    assert str(agent.raised["raw"]).startswith("request_permission: kind must be one of")
    assert conn.sink.requests("session/request_permission") == []


def test_snake_case_keywords_go_out_as_acps_names_and_locations_as_absolute_objects(turns):
    conn, agent, session_id = turns

    def action(turn: Turn) -> None:
        call = turn.tool_call(title="Look", kind="search", raw_input={"q": 1}, locations=["notes.txt", {"path": "/a", "line": 2}],
                              meta={"k": "v"})
        call.update(raw_output={"hits": 0}, content=[content.text("nothing")])
        call.fail("no luck")

    started, updated, failed = run(conn, agent, session_id, "snake", action)
    assert started["rawInput"] == {"q": 1} and started["_meta"] == {"k": "v"}
    assert started["locations"] == [{"path": f"{CWD}/notes.txt"}, {"path": "/a", "line": 2}]
    assert updated["rawOutput"] == {"hits": 0} and "raw_output" not in updated
    assert failed["status"] == "failed" and failed["content"] == [content.text("no luck")]
    assert agent.raised == {}


def test_tool_call_returns_a_handle_whose_id_is_the_one_sent(turns):
    conn, agent, session_id = turns
    updates = run(conn, agent, session_id, "handle", lambda t: t.tool_call("mine", "Mine"))
    assert agent.returned["handle"].id == "mine" == updates[0]["toolCallId"]
    updates = run(conn, agent, session_id, "complete", lambda t: t.tool_call(title="Auto").complete())
    assert [u["status"] for u in updates] == ["pending", "completed"]
    assert updates[0]["toolCallId"] == updates[1]["toolCallId"] and updates[0]["toolCallId"].startswith("call_")


def test_notices_and_compactions_go_out_as_acp_spells_them(turns):
    """A notice with its severity and description; a compaction's id, status, summary, chunks and error."""
    conn, agent, session_id = turns

    def action(turn: Turn) -> list[bool]:
        sent = [turn.notice("Heads up", severity="_custom", description="more", meta={"k": 1})]
        compaction = turn.compaction(compaction_id="c7")
        sent += [compaction.summary_chunk("part"), compaction.fail("too long"), compaction.cancel(), compaction.sent]
        return sent

    notice, started, chunk, failed, cancelled = run(conn, agent, session_id, "both", action)
    assert notice == {"sessionUpdate": "notice", "severity": "_custom", "title": "Heads up", "description": "more", "_meta": {"k": 1}}
    assert started == {"sessionUpdate": "compaction_update", "compactionId": "c7", "status": "in_progress"}
    assert chunk == {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c7", "content": {"type": "text", "text": "part"}}
    assert failed == {"sessionUpdate": "compaction_update", "compactionId": "c7", "status": "failed", "error": "too long"}
    assert cancelled["status"] == "cancelled"
    assert agent.returned["both"] == [True] * 5 and agent.raised == {}


def test_a_malformed_notice_is_refused_even_for_a_client_that_would_not_be_sent_it(unit):
    """The check comes first: a mistake raises for every client, not only those shown notices."""
    agent = RunsActionsAgent()
    conn: UnitConnection = unit(agent)
    conn.initialize(capabilities={})
    session_id = conn.new_session(cwd=CWD)
    assert run(conn, agent, session_id, "bad", lambda t: t.notice("", severity="info")) == []
    assert str(agent.raised["bad"]) == "notice: title must not be empty"
    # What could not go on the wire is refused too, as it is for a client that is sent notices.
    assert run(conn, agent, session_id, "nan", lambda t: t.notice("Hi", meta={"x": math.nan})) == []
    assert type(agent.raised["nan"]) is ValueError and str(agent.raised["nan"]).startswith("notice: not JSON: ")
    assert run(conn, agent, session_id, "good", lambda t: [t.notice("Hi"), t.compaction().sent, t.can_show_notices]) == []
    assert agent.returned["good"] == [False, False, False]


def test_nan_is_no_line_number():
    """A float is not a line, not even an integral one (the wire wants a uint32)."""
    for bad in (3.0, math.nan):
        with pytest.raises(TypeError):
            update_checks.locations("tool_call", [{"path": "a", "line": bad}])


def test_the_unit_layer_saw_a_valid_stream(turns):
    """The harness's schema check holds for every update the checked calls let through."""
    conn, agent, session_id = turns
    run(conn, agent, session_id, "plan", lambda t: t.plan([{"content": "x", "priority": "high", "status": "in_progress"}]))
    wait_until(lambda: conn.sink.updates(session_id), what="the plan", changed=conn.sink.changed)
    assert conn.schema_problems() == []


# -- notices and compaction: the call-site checks against the schema (property-based) ----------------

def _schema_accepts(update: dict[str, Any]) -> bool:
    from acp_green.tools.rig.schema import default_schema

    return not default_schema().problems({"jsonrpc": "2.0", "method": "session/update",
                                          "params": {"sessionId": "s", "update": update}})


def _extension_or_named(value: str, named: frozenset[str]) -> bool:
    return value in named or (value.startswith("_") and len(value) > 1)


open_enum_text = st.one_of(st.text(max_size=12), st.sampled_from(["info", "warning", "error", "in_progress", "completed",
                                                                 "failed", "cancelled", "_", "_x", "Info", " info"]))
not_a_string = st.one_of(st.none(), st.integers(), st.booleans(), st.lists(st.text(max_size=2), max_size=2))


@settings(deadline=None, max_examples=150)
@given(severity=open_enum_text, title=st.text(max_size=8), description=st.one_of(st.none(), st.text(max_size=8)))
def test_a_notice_is_accepted_exactly_with_a_known_or_extension_severity_and_a_title(severity, title, description):
    """Refused, naming the field, unless the severity is named by ACP or starts with `_` and the
    title is not empty; whatever is accepted passes the stable and unstable schemas."""
    update = {"sessionUpdate": "notice", "severity": severity, "title": title, "description": description}
    good = _extension_or_named(severity, update_checks.NOTICE_SEVERITIES) and title != ""
    try:
        checked = update_checks.session_update("notice", update)
    except ValueError as exc:
        assert not good
        assert str(exc).startswith("notice: severity" if not _extension_or_named(severity, update_checks.NOTICE_SEVERITIES)
                                   else "notice: title must not be empty"), exc
    else:
        assert good and checked == update and _schema_accepts(checked)


@settings(deadline=None, max_examples=100)
@given(field=st.sampled_from(["severity", "title", "description", "_meta"]), bad=not_a_string)
def test_a_notice_field_of_the_wrong_type_is_refused_naming_it(field, bad):
    update = {"sessionUpdate": "notice", "severity": "info", "title": "T", field: bad}
    if bad is None and field in ("description", "_meta"):
        assert update_checks.session_update("notice", update) == update  # null means absent
        return
    if field == "_meta" and isinstance(bad, dict):
        return
    with pytest.raises(TypeError, match=f"^notice: {field} must be"):
        update_checks.session_update("notice", update)


blocks = st.one_of(st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=5)),
                   st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "txt"])}))


@settings(deadline=None, max_examples=150)
@given(status=open_enum_text, compaction_id=st.text(max_size=4),
       summary=st.one_of(st.none(), st.lists(blocks, max_size=3), st.text(max_size=3)),
       error=st.one_of(st.none(), st.text(max_size=5), st.integers()))
def test_a_compaction_update_is_refused_exactly_where_it_is_malformed(status, compaction_id, summary, error):
    """A compaction update passes the check exactly when its id is a non-empty string, its status
    named by ACP or an extension, its summary a list of complete content blocks and its error a
    string; what passes is valid against the schemas, and a refusal names the call."""
    update = {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": status,
              "summary": summary, "error": error}
    good = (compaction_id != "" and _extension_or_named(status, update_checks.COMPACTION_STATUSES)
            and (summary is None or (isinstance(summary, list) and all(b == {"type": "text", "text": b.get("text")}
                                                                      and isinstance(b.get("text"), str) for b in summary)))
            and (error is None or isinstance(error, str)))
    try:
        checked = update_checks.session_update("compaction_update", update)
    except (TypeError, ValueError) as exc:
        assert not good and str(exc).startswith("compaction_update: "), exc
    else:
        assert good and _schema_accepts(checked), checked


@settings(deadline=None, max_examples=100)
@given(content=st.one_of(blocks, st.text(max_size=3), st.none()), compaction_id=st.one_of(st.text(max_size=3), st.integers()))
def test_a_summary_chunk_needs_a_compaction_id_and_one_content_block(content, compaction_id):
    update = {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id, "content": content}
    good = (isinstance(compaction_id, str) and compaction_id != "" and isinstance(content, dict)
            and content.get("type") == "text" and isinstance(content.get("text"), str))
    try:
        checked = update_checks.session_update("compaction_summary", update)
    except (TypeError, ValueError) as exc:
        assert not good and str(exc).startswith("compaction_summary: "), exc
    else:
        assert good and _schema_accepts(checked), checked
