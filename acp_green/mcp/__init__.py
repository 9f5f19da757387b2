"""MCP for acp_green: MCP's JSON-RPC spoken by the runtime itself, and MCP-over-ACP bridges.

- `process`: a stdio child process run the gevent way;
- `escapees`: finding a child's descendants that left its process group, by an environment mark;
- `peer`: the JSON-RPC core every MCP link shares (ids, pending calls, envelopes, strict decoding);
- `jsonrpc`: our client end of MCP's JSON-RPC to such a process;
- `httplink`, `sse`: the same to a streamable-HTTP server; `httpguard`: the bounds on its response heads, and TLS that yields;
- `tools`: an in-process MCP tool server written against acp_green's API;
- `client`: the MCP client session agent code uses (`turn.mcp(name)`);
- `bridge`: inbound bridges (the peer connects to servers we provide);
- `registry`: the bridges of one ACP connection and the `mcp/*` routes;
- `session`: the MCP servers of one session;
- `starting`: the places for servers that are starting, shared by the sessions in turn.


Importing the package imports none of them: an agent that only declares tools, or never uses
MCP, answers `initialize` without loading the process, JSON-RPC and HTTP machinery.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {"McpClientSession": ".client", "McpTools": ".client", "result_text": ".client",
            "Tool": ".tools", "ToolCall": ".tools", "ToolServer": ".tools"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value
