"""Start-up: `acp-green serve` answers `initialize` having imported only what that answer needs.

The store (sqlite3 and the state directory), the MCP process and HTTP machinery, the rig, the
bench and the other subcommands load later: the store opens in the background once the first
message has been handled, and the first request that needs it waits for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from acp_green.store.statedb import db_path
from tests.helpers import TESTS

WRAPPER = TESTS / "peer_agents" / "modules_at_first_answer.py"

#: Imported by the answer to `initialize`: none of these (a name or any submodule of it).
NOT_BEFORE_INITIALIZE = (
    "sqlite3", "acp_green.store.sqlite", "acp_green.store.statedb", "acp_green.store.statedir",
    "acp_green.store.base", "acp_green.store.report", "acp_green.store.operations",
    "acp_green.mcp.process", "acp_green.mcp.jsonrpc", "acp_green.mcp.client", "acp_green.mcp.session",
    "acp_green.mcp.httplink", "geventhttpclient", "gevent.subprocess", "mcp",
    "acp_green.tools.rig", "acp_green.tools.bench", "acp_green.blocks", "acp_green.terminals",
    "acp_green.elicitation", "secrets", "acp_green.testing", "pytest", "_pytest",
)


#: What monkey-patching itself imports (the default of `serve`): the patched `subprocess` is gevent's.
PATCHING_IMPORTS = ("gevent.subprocess",)


def loaded_too_early(modules: list[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return [m for m in modules if m not in allowed
            and any(m == name or m.startswith(name + ".") for name in NOT_BEFORE_INITIALIZE)]


@pytest.mark.parametrize("patching", [(), ("--no-monkey-patch",)], ids=["patched", "unpatched"])
def test_initialize_is_answered_before_the_store_mcp_and_http_are_imported(launch, tmp_path, patching):
    """The modules loaded when the `initialize` answer is written include no store, no MCP
    process/JSON-RPC/HTTP client, no rig or bench; afterwards the store opens by itself, and
    session/new and session/list work against the state database."""
    state = tmp_path / "state"
    listing = tmp_path / "modules.txt"
    agent = launch(command=[sys.executable, str(WRAPPER), str(listing), "serve", "--state-dir", str(state), *patching])
    result = agent.initialize()
    assert result["protocolVersion"] == 1
    modules = listing.read_text(encoding="utf-8").split()
    assert "acp_green.server" in modules and "acp_green.protocol.connection" in modules  # the list is real
    assert loaded_too_early(modules, () if patching else PATCHING_IMPORTS) == []
    # The store opened in the background, with no request asking for it.
    agent.wait_for(lambda: os.path.exists(db_path(str(state))), what="the state database to be created")
    sid = agent.new_session()
    assert [s["sessionId"] for s in agent.call("session/list", {})["sessions"]] == [sid]


def test_the_first_requests_after_start_up_reach_the_store_in_order(launch, tmp_path):
    """session/new written together with `initialize` (one write), before the store is open:
    session/list, which waits for the store, sees the session; after a prompt and a restart on
    the same state directory it is still there."""
    state = str(tmp_path / "state")
    agent = launch("--state-dir", state)
    init = agent.make_request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    new = agent.make_request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    agent.send(init, new)
    sid = agent.pending_for(new).result()["sessionId"]
    assert [s["sessionId"] for s in agent.call("session/list", {})["sessions"]] == [sid]
    assert agent.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    agent.close_input()
    assert agent.wait_exit() == 0
    again = launch("--state-dir", state)
    again.initialize()
    assert [s["sessionId"] for s in again.call("session/list", {})["sessions"]] == [sid]


def test_importing_the_package_imports_neither_the_test_plugin_nor_pytest():
    """`import acp_green` and its public names never load `acp_green.testing` (the pytest plugin
    for agent authors) or pytest: an agent's process has no test framework in it."""
    code = ("import json, sys, acp_green; acp_green.Agent, acp_green.Server; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest', 'pluggy') "
            "or m.startswith('acp_green.testing'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert json.loads(out.stdout) == []
