"""Helpers shared by the MCP tests: server commands, connecting, and the recorder's file (process
liveness comes from tests/helpers.py)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import acp_green

from tests.helpers import wait_until

__all__ = ["INIT_PARAMS", "RECORDER", "SDK_TOOLS"]

HERE = Path(__file__).resolve().parent
SDK_TOOLS = str(HERE / "mcp_servers" / "sdk_tools.py")
RECORDER = str(HERE / "mcp_servers" / "recorder.py")
INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}


def command(script: str, *args: str) -> str:
    return shlex.join([sys.executable, script, *args])


def provide(name: str, script: str, *args: str) -> list[str]:
    """`--provide-mcp NAME=COMMAND` arguments for `acp-green serve`."""
    return ["--provide-mcp", f"{name}={command(script, *args)}"]


def stdio_entry(name: str, script: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A stdio McpServer entry for `session/new`."""
    return {"name": name, "command": sys.executable, "args": [script],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}


def connect(agent: Any, server_id: str, key: str = "serverId") -> tuple[str, int | None]:
    """mcp/connect; returns (connectionId, pid of the process started, if any)."""
    result = agent.call("mcp/connect", {key: server_id})
    pid = ((result.get("_meta") or {}).get("acpGreen") or {}).get("pid")
    return result["connectionId"], pid


def message(agent: Any, connection_id: str, method: str, params: Any = None, request_id: Any = None) -> dict[str, Any]:
    """An mcp/message request, built (not sent)."""
    inner: dict[str, Any] = {"connectionId": connection_id, "method": method}
    if params is not None:
        inner["params"] = params
    return agent.make_request("mcp/message", inner, request_id)


def initialize(agent: Any, connection_id: str) -> dict[str, Any]:
    """The MCP handshake over a bridge."""
    request = message(agent, connection_id, "initialize", INIT_PARAMS)
    agent.send(request)
    result = agent.pending_for(request).result()
    agent.notify("mcp/message", {"connectionId": connection_id, "method": "notifications/initialized"})
    return result


def call_tool(agent: Any, connection_id: str, tool: str, arguments: dict[str, Any], request_id: Any = None) -> dict[str, Any]:
    return message(agent, connection_id, "tools/call", {"name": tool, "arguments": arguments}, request_id)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


def wait_file_lines(path: str, predicate: Any, timeout: float = 30.0) -> list[str]:
    """Wait until the recorder's file has lines satisfying predicate(lines)."""
    def lines() -> list[str]:
        return Path(path).read_text().splitlines() if os.path.exists(path) else []

    try:
        wait_until(lambda: predicate(lines()), timeout, f"lines in {path}")
    except AssertionError:
        pass  # the caller asserts on what is there, naming what it expected
    return lines()


# -- the two MCP-over-ACP shapes and the schemas each is checked against -------------------------
def _vendored_schemas() -> Path:
    """The ACP schema copies the package ships (acp_green/schema/README.md says where each is from)."""
    return Path(acp_green.__file__).parent / "schema"


def message_shape_schema() -> Path:
    """The unstable schema of the newest official SDK (2.4.0): `mcp/message` by serverId + requestId."""
    return _vendored_schemas() / "schema.unstable.json"


def connect_shape_schema() -> Path:
    """The older unstable schema: mcp/connect, mcp/message on a connectionId, mcp/disconnect."""
    return _vendored_schemas() / "v1-older" / "schema.unstable.json"


_VALIDATORS: dict[tuple[Path, str], Any] = {}


def mcp_problems(message: dict[str, Any], schema: Path, *, answers: str | None = None) -> list[str]:
    """Problems of one agent-sent mcp/* message (request or notification params, or the result
    of a response to `answers`) under the `$defs` type of `schema` whose x-method names it."""
    import json

    from jsonschema import Draft202012Validator

    root = json.loads(schema.read_text(encoding="utf-8"))
    method = answers or message["method"]
    kind = "Response" if answers else ("Request" if "id" in message else "Notification")
    names = [n for n, d in root["$defs"].items() if isinstance(d, dict) and d.get("x-method") == method and n.endswith(kind)]
    if not names:
        return [f"{schema}: no {kind} type for {method}"]
    key = (schema, names[0])
    if key not in _VALIDATORS:
        _VALIDATORS[key] = Draft202012Validator({"$defs": root["$defs"], "$ref": f"#/$defs/{names[0]}"})
    payload = message.get("result") if answers else message.get("params")
    return [f"{names[0]}: {e.message}" for e in _VALIDATORS[key].iter_errors(payload)]
