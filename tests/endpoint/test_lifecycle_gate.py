"""ACP's lifecycle order: nothing but `initialize` before `initialize`; its protocolVersion is a uint16."""

from __future__ import annotations

from typing import Any

import pytest

from acp_green.demo import DemoAgent
from tests.unit_harness import UnitConnection

NOT_INITIALIZED = {"code": -32600, "data": {"reason": "not_initialized"}}


@pytest.mark.parametrize(("method", "params"), [
    ("session/new", {"cwd": "/tmp", "mcpServers": []}),
    ("session/prompt", {"sessionId": "sess_x", "prompt": [{"type": "text", "text": "hi"}]}),
    ("session/list", {}),
    ("authenticate", {"methodId": "x"}),
    ("_acp_green/stats", {}),
    ("mcp/connect", {"serverId": "x"}),
])
def test_requests_before_initialize_are_refused_not_initialized(unit: Any, method: str, params: dict[str, Any]) -> None:
    """Before `initialize` a known method is refused -32600 `not_initialized`, naming it; nothing runs
    (no session exists afterwards); after `initialize` the same request is served."""
    conn: UnitConnection = unit(DemoAgent())
    error = conn.error(conn.request(method, params))
    assert {"code": error["code"], "data": error.get("data")} == NOT_INITIALIZED, error
    assert method in error["message"] and "initialize" in error["message"]
    assert len(conn.sessions) == 0
    conn.initialize()
    assert conn.new_session().startswith("sess_")


def test_an_unknown_method_before_initialize_is_still_method_not_found(unit: Any) -> None:
    conn: UnitConnection = unit(DemoAgent())
    assert conn.error(conn.request("no/such", {}))["code"] == -32601


@pytest.mark.parametrize("version", [2 ** 70, 65536, -1, -(2 ** 70)])
def test_a_protocol_version_outside_uint16_is_invalid_params_naming_the_field(unit: Any, version: int) -> None:
    """The schema's ProtocolVersion is a uint16: anything else is -32602 with `data.field`, and
    the connection stays uninitialized."""
    conn: UnitConnection = unit(DemoAgent())
    error = conn.error(conn.request("initialize", {"protocolVersion": version}))
    assert error["code"] == -32602 and error["data"] == {"field": "protocolVersion"}, error
    assert "protocolVersion" in error["message"]
    assert conn.error(conn.request("session/new", {"cwd": "/tmp", "mcpServers": []}))["data"]["reason"] == "not_initialized"


@pytest.mark.parametrize(("version", "negotiated"), [(0, 1), (1, 1), (2, 2), (65535, 2)])
def test_a_protocol_version_in_uint16_is_negotiated(unit: Any, version: int, negotiated: int) -> None:
    """The highest version served at or below the request: 1 for 0 and 1, the v2 draft from 2 on."""
    conn: UnitConnection = unit(DemoAgent())
    assert conn.call("initialize", {"protocolVersion": version, "info": {"name": "t", "version": "0"}})["protocolVersion"] == negotiated
