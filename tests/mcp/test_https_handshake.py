"""TLS handshakes with HTTP MCP servers wait cooperatively (gevent's SSLContext, bounded by the
connect timeout): servers that accept TCP and never speak TLS, or speak something else, fail their
calls clearly, all in parallel, and a slow but real TLS server is reached, while control requests
are answered all along.

S10: control stays answered while TLS handshakes wait.
"""

from __future__ import annotations

import subprocess
import time

from tests.mcp.hostile_http_helpers import hostile_servers, http_entry, tool_text, tool_update, worst_control_latency

#: The longest a control request may wait while handshakes are under way (generous: CPU hogs beside).
CONTROL_BOUND = 1.5


def test_servers_that_never_finish_a_handshake_fail_in_parallel_and_control_is_answered(launch):
    """Four https:// servers that accept and say nothing and one that sends garbage: while their
    handshakes wait, control requests are answered within a bound; each call then fails saying
    why (a timeout, a TLS failure), all four timeouts together in about one connect timeout (10 s),
    not one after another (40 s)."""
    with hostile_servers(4, "silent") as silent, hostile_servers(1, "garbage") as [garbage]:
        agent = launch("--ephemeral")
        agent.initialize()
        entries = [http_entry(f"s{i}", f"https://127.0.0.1:{port}/mcp") for i, port in enumerate(silent)]
        started = time.monotonic()
        session_id = agent.new_session(mcp_servers=[*entries, http_entry("g", f"https://127.0.0.1:{garbage}/mcp")])
        worst, _answered = worst_control_latency(agent, 4.0)
        assert worst < CONTROL_BOUND, f"a control request waited {worst:.2f}s"
        assert agent.prompt(session_id, "/mcp g echo").result(timeout=60) == {"stopReason": "end_turn"}
        assert tool_update(agent, session_id)["status"] == "failed"
        assert "TLS failed" in tool_text(agent, session_id)
        for name in ("s0", "s1", "s2", "s3"):
            assert agent.prompt(session_id, f"/mcp {name} echo").result(timeout=60) == {"stopReason": "end_turn"}
            assert "timed out" in tool_text(agent, session_id)
        took = time.monotonic() - started
        assert took < 25, f"four handshake timeouts took {took:.1f}s: they did not run in parallel"


def self_signed(tmp_path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made by `openssl req`."""
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def test_a_slow_real_tls_server_is_reached_while_control_is_answered(launch, tmp_path):
    """A real TLS server (a self-signed certificate the agent is told to trust with SSL_CERT_FILE)
    that waits 3 s before its handshake: control requests are answered meanwhile, and the call
    then goes through over TLS."""
    cert, key = self_signed(tmp_path)
    with hostile_servers(1, "tls-slow", "3", cert, key) as [port]:
        agent = launch("--ephemeral", env={"SSL_CERT_FILE": cert})
        agent.initialize()
        session_id = agent.new_session(mcp_servers=[http_entry("t", f"https://127.0.0.1:{port}/mcp")])
        worst, _answered = worst_control_latency(agent, 2.5)
        assert worst < CONTROL_BOUND, f"a control request waited {worst:.2f}s"
        assert agent.prompt(session_id, "/mcp t echo").result(timeout=60) == {"stopReason": "end_turn"}
        assert tool_update(agent, session_id)["status"] == "completed", tool_text(agent, session_id)
        assert "over tls" in tool_text(agent, session_id)
