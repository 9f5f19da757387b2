"""What the process does around the protocol: stdout hygiene, patching, options, exit."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from acp_green.cli import cli
from tests.helpers import chunk_texts


def test_only_jsonrpc_reaches_stdout_from_a_noisy_agent(launch):
    """Prints, sys.stdout writes, logs and a child inheriting stdio all land on stderr, never the wire."""
    agent = launch("--agent", "tests.agents:NoisyAgent", "--log-level", "debug")
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "make noise").result() == {"stopReason": "end_turn"}
    agent.close_input()
    assert agent.wait_exit() == 0
    agent.close()
    inbound = [r for r in agent.records if r.direction == "in"]
    assert inbound and all(r.message is not None and r.message.get("jsonrpc") == "2.0" for r in inbound)
    stderr = bytes(agent.stderr).decode()
    assert "stray print from agent code" in stderr
    assert "stray write to sys.stdout" in stderr
    assert "child writing to inherited stdout" in stderr
    assert "a log line" in stderr


def test_serve_patches_unless_told_not_to(launch):
    """`serve` patches before the agent is imported (--monkey-patch, the default, is accepted);
    --no-monkey-patch leaves the process unpatched."""
    plain = launch("--agent", "tests.agents:PatchReportAgent", "--no-monkey-patch")
    plain.initialize()
    sid = plain.new_session()
    plain.prompt(sid, "?").result()
    patched = launch("--agent", "tests.agents:PatchReportAgent")
    patched.initialize()
    sid2 = patched.new_session()
    patched.prompt(sid2, "?").result()
    explicit = launch("--agent", "tests.agents:PatchReportAgent", "--monkey-patch")
    explicit.initialize()
    sid3 = explicit.new_session()
    explicit.prompt(sid3, "?").result()
    assert chunk_texts(plain.updates(sid)) == ["socket patched: False"]
    assert chunk_texts(patched.updates(sid2)) == ["socket patched: True"]
    assert chunk_texts(explicit.updates(sid3)) == ["socket patched: True"]


def test_importing_the_package_imports_no_gevent():
    """`import acp_green` stays cheap, so --monkey-patch can still come first."""
    code = "import sys, acp_green; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('gevent', 'threading', 'socket'))))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, check=True, text=True)
    assert not any(m.startswith("gevent") or m == "socket" for m in json.loads(out.stdout))


def test_serve_help_documents_every_option():
    """Every serve option that exists is documented in --help."""
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--agent", "--max-background", "--shutdown-grace", "--idle-timeout", "--max-line-bytes",
                   "--state-dir", "--ephemeral", "--monkey-patch", "--no-monkey-patch", "--block-warning", "--log-level"):
        assert option in result.output


def test_bad_agent_spec_is_a_clear_usage_error():
    """A wrong --agent fails before serving, naming the problem."""
    # --no-monkey-patch: the command runs in this (test) process, which must stay unpatched.
    result = CliRunner().invoke(cli, ["serve", "--no-monkey-patch", "--agent", "no_such_module_xyz:Agent"])
    assert result.exit_code == 2 and "cannot import" in result.output
    result = CliRunner().invoke(cli, ["serve", "--no-monkey-patch", "--agent", "json"])
    assert result.exit_code == 2 and "MODULE:ATTR" in result.output


def test_serve_help_documents_stable_only():
    """`acp-green serve --help` names --stable-only and what it hides."""
    text = " ".join(CliRunner().invoke(cli, ["serve", "--help"], catch_exceptions=False).output.split())
    assert "--stable-only" in text
    for hidden in ("session/fork", "session/archive", "session/unarchive", "session/set_title", "session/status", "mcp/connect"):
        assert hidden in text, hidden


def test_serve_stable_only_reaches_the_protocol(launch):
    """`serve --stable-only` over real pipes: the unstable capabilities are not advertised and
    session/fork answers -32601; without it, fork is advertised and answers."""
    stable = launch("--ephemeral", "--stable-only")
    capabilities = stable.initialize()["agentCapabilities"]
    assert "fork" not in capabilities["sessionCapabilities"] and "acp" not in capabilities["mcpCapabilities"]
    sid = stable.new_session()
    assert stable.request("session/fork", {"sessionId": sid, "cwd": "/tmp"}).error()["code"] == -32601
    full = launch("--ephemeral")
    assert full.initialize()["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
    sid = full.new_session()
    assert full.call("session/fork", {"sessionId": sid, "cwd": "/tmp"})["sessionId"] != sid
