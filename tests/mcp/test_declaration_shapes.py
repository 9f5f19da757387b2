"""A declared MCP server not of ACP's shape is the client's error: `session/new`, `session/load`,
`session/resume` and `session/fork` answer -32602 naming the field at fault
(`mcpServers[0].headers`, `mcpServers[1].env[0].value`) and make nothing: no session is created or
reopened, the session's declaration in force is untouched, and no server is started.

ACP's schema (McpServerStdio, McpServerHttp, McpServerSse): `args` is an array of strings, `env` an
array of EnvVariable and `headers` an array of HttpHeader, each a {name, value} object of two
strings; null reads as the empty array. Before, `"headers": 5` was answered -32603 (a TypeError)
after the session had been created, and `"headers": "x"` or `[1]` made a session whose server
failed when a turn first asked for it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit_harness import UnitConnection

URL = "http://127.0.0.1:9/mcp"
# Entries the agent never starts by itself (an unsupported transport, a client's server reached on
# first use): neighbours of a malformed entry that start nothing even if the check were gone.
NEIGHBOURS = [{"type": "sse", "name": "n-sse", "url": URL, "headers": []}, {"type": "acp", "name": "n-acp", "serverId": "s"}]
METHODS = ["session/new", "session/load", "session/resume", "session/fork"]


def http(headers: Any, kind: str = "http") -> dict[str, Any]:
    return {"type": kind, "name": "web", "url": URL, "headers": headers}


def stdio(**fields: Any) -> dict[str, Any]:
    return {"name": "st", "command": "/bin/true", "args": [], "env": [], **fields}


MALFORMED = [
    (http("x"), "mcpServers[0].headers"),
    (http(5), "mcpServers[0].headers"),
    (http(True), "mcpServers[0].headers"),
    (http({"name": "X", "value": "y"}), "mcpServers[0].headers"),
    (http([1]), "mcpServers[0].headers[0]"),
    (http([{"name": "X", "value": "y"}, "X: y"]), "mcpServers[0].headers[1]"),
    (http([{"name": "X"}]), "mcpServers[0].headers[0].value"),
    (http([{"value": "y"}]), "mcpServers[0].headers[0].name"),
    (http([{"name": 7, "value": "y"}]), "mcpServers[0].headers[0].name"),
    (http("x", kind="sse"), "mcpServers[0].headers"),
    (http([{"name": "X", "value": None}], kind="sse"), "mcpServers[0].headers[0].value"),
    ({"type": "http", "name": "web", "url": 80, "headers": []}, "mcpServers[0].url"),
    (stdio(env="A=1"), "mcpServers[0].env"),
    (stdio(env=[["A", "1"]]), "mcpServers[0].env[0]"),
    (stdio(env=[{"name": "A", "value": 1}]), "mcpServers[0].env[0].value"),
    (stdio(args="-v"), "mcpServers[0].args"),
    (stdio(args=["-v", 2]), "mcpServers[0].args[1]"),
    (stdio(command=["/bin/true"]), "mcpServers[0].command"),
    (stdio(name=5), "mcpServers[0].name"),
]


class Attempt:
    """One connection with a session to reload or fork, and what a refused request must leave as it was."""

    def __init__(self, connection: UnitConnection) -> None:
        self.connection = connection
        connection.initialize()
        self.session_id = connection.new_session(mcp_servers=NEIGHBOURS)  # its declaration in force
        self.session = connection.sessions.get(self.session_id)
        self.before = self.state()

    def state(self) -> tuple[Any, ...]:
        protocol = self.connection.protocol
        servers = protocol.session_mcp.get(self.session_id)
        return (self.connection.call("session/list", {}), list(self.session.mcp_servers), set(protocol.session_mcp),
                servers, dict(servers.stdio) if servers else None, dict(servers.http) if servers else None)

    def refused(self, method: str, servers: list[Any]) -> dict[str, Any]:
        """The error `method` answers for `servers`; asserts nothing was made or changed."""
        params: dict[str, Any] = {"cwd": "/tmp", "mcpServers": servers}
        if method != "session/new":
            params["sessionId"] = self.session_id
        response = self.connection.sink.response(self.connection.request(method, params))
        assert "error" in response, f"{method} accepted {servers!r}: {response}"
        assert self.state() == self.before, "a refused declaration made or changed something"
        return response["error"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("entry", "field"), MALFORMED)
def test_a_malformed_declaration_is_refused_naming_its_field_and_makes_nothing(unit, method, entry, field):
    attempt = Attempt(unit())
    error = attempt.refused(method, [entry])
    assert error["code"] == -32602, error
    assert error["data"] == {"field": field}
    assert error["message"].startswith(f"{method}: field '{field}' ")


def test_the_field_names_the_entry_at_fault_among_good_ones(unit):
    attempt = Attempt(unit())
    error = attempt.refused("session/new", [*NEIGHBOURS, stdio(env=[{"name": "A", "value": "1"}, {"name": "B"}])])
    assert error["code"] == -32602 and error["data"] == {"field": "mcpServers[2].env[1].value"}
    assert "is missing" in error["message"]


@pytest.mark.parametrize("entry", [
    http(None), http([]), http([{"name": "X-Token", "value": "t", "_meta": {"k": 1}}]), http(None, kind="sse"),
    {"type": "acp", "name": "a", "serverId": "s"}, {"type": "future", "name": "f", "headers": 5},
])
def test_well_shaped_declarations_are_still_accepted(unit, entry):
    """null reads as the empty array; `_meta` rides along; a transport this agent does not know
    is not checked for fields it does not use (it fails when a turn asks for it)."""
    connection = unit()
    connection.initialize()
    session_id = connection.new_session(mcp_servers=[entry])
    assert connection.sessions.get(session_id).mcp_servers == [entry]


def test_values_of_the_right_shape_that_cannot_be_used_still_fail_only_when_used(unit):
    """Shapes only: an empty command, a non-http URL, a header HTTP cannot carry are the server's
    failure to start, told to the turn that asks for it (tests/mcp/test_http.py, test_limits.py)."""
    connection = unit()
    connection.initialize()
    entries = [stdio(command=""), {"type": "http", "name": "ftp", "url": "ftp://x/", "headers": []},
               http([{"name": "X", "value": "a\r\nb"}])]
    session_id = connection.new_session(mcp_servers=entries)
    assert set(connection.protocol.session_mcp[session_id].unstartable) == {"st", "ftp", "web"}


# -- property: any malformed headers, env or args --------------------------------------------------

non_string = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                       st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))
not_an_array = st.one_of(st.text(max_size=6), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                         st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))
good_pair = st.fixed_dictionaries({"name": st.text(max_size=6), "value": st.text(max_size=6)})
MISSING = object()


@st.composite
def bad_pair(draw: Any) -> tuple[Any, str]:
    """An array item that is no {name, value} object of two strings, and the path under the item at fault."""
    if draw(st.booleans()):
        return draw(st.one_of(non_string.filter(lambda v: not isinstance(v, dict)), st.text(max_size=4))), ""
    item: dict[str, Any] = {}
    fault = ""
    for key in ("name", "value"):
        value = draw(st.one_of(st.text(max_size=4), non_string, st.just(MISSING)))
        if value is not MISSING:
            item[key] = value
        if not fault and not isinstance(item.get(key, MISSING), str):
            fault = f".{key}"
    if not fault:  # both strings after all: spoil one
        key = draw(st.sampled_from(["name", "value"]))
        item[key] = draw(non_string)
        fault = f".{key}"
    return item, fault


@st.composite
def malformed_entry(draw: Any) -> tuple[dict[str, Any], str]:
    """A declaration of any transport whose headers, env or args is malformed, and the path at fault."""
    field = draw(st.sampled_from(["headers", "env", "args"]))
    kind = draw(st.sampled_from(["http", "sse"])) if field == "headers" else draw(st.sampled_from([None, "stdio"]))
    entry: dict[str, Any] = http([], kind) if kind in ("http", "sse") else stdio()
    if kind == "stdio":
        entry["type"] = "stdio"
    if draw(st.booleans()):
        entry[field] = draw(not_an_array)
        return entry, f".{field}"
    if field == "args":
        good = draw(st.lists(st.text(max_size=4), max_size=3))
        bad = draw(non_string)
        where = draw(st.integers(0, len(good)))
        entry[field] = [*good[:where], bad, *good[where:]]
        return entry, f".args[{where}]"
    good_items = draw(st.lists(good_pair, max_size=3))
    item, under = draw(bad_pair())
    where = draw(st.integers(0, len(good_items)))
    entry[field] = [*good_items[:where], item, *good_items[where:]]
    return entry, f".{field}[{where}]{under}"


@settings(deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(METHODS), malformed=malformed_entry(), before=st.integers(0, 2))
def test_any_malformed_headers_env_or_args_is_refused_32602_and_makes_nothing(method, malformed, before):
    """Property: whatever malformed headers, env or args a declaration carries, among well-shaped
    neighbours, each method answers -32602 naming exactly that field, never -32603, never a result,
    and no session is created or reopened, no declaration replaced, no server started."""
    entry, under = malformed
    connection = UnitConnection()
    try:
        attempt = Attempt(connection)
        error = attempt.refused(method, [*NEIGHBOURS[:before], entry])
        field = f"mcpServers[{before}]{under}"
        assert error["code"] == -32602, error
        assert error["data"] == {"field": field}, (error, entry)
    finally:
        connection.close()
