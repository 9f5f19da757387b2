"""Agents on several hosts share one PostgreSQL store: a client moves a session from an agent that
was SIGKILLed to another agent and loses nothing (store/postgres.py, docs/SESSIONS.md).

Each agent is a separate `acp-green serve --listen ... --store URL` process, as it would be on
its own host: they share nothing but the database server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.remote_peers import ListeningAgent

SESSION_IN_USE = -32000
PROMPTS = ("/echo first turn", "/stream 40 64", "/echo third turn")


def load_params(session_id: str) -> dict:
    return {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}


def chunks(updates: list[dict], kind: str) -> list[str]:
    return [u["content"]["text"] for u in updates if u.get("sessionUpdate") == kind]


def test_a_session_of_an_agent_killed_on_one_host_loads_whole_on_another(postgres_url):
    first = ListeningAgent("--store", postgres_url)
    second = ListeningAgent("--store", postgres_url)
    try:
        client = first.ws()
        client.initialize()
        session_id = client.new_session()
        for text in PROMPTS:
            answer = client.answer_to(client.prompt(session_id, text))
            assert answer["result"] == {"stopReason": "end_turn"}, answer
        seen = client.updates(session_id)

        elsewhere = second.ws()
        elsewhere.initialize()
        refused = elsewhere.call("session/load", load_params(session_id))
        assert refused["error"]["code"] == SESSION_IN_USE, refused
        assert f"pid {first.process.proc.pid} " in refused["error"]["data"]["owner"], refused

        os.killpg(first.process.proc.pid, signal.SIGKILL)  # the host goes: no shutdown, no last commit
        first.process.proc.wait(timeout=30)

        loaded = elsewhere.call("session/load", load_params(session_id))
        assert "result" in loaded, loaded
        replayed = elsewhere.updates(session_id)
        assert chunks(replayed, "user_message_chunk") == list(PROMPTS)
        assert chunks(replayed, "agent_message_chunk") == chunks(seen, "agent_message_chunk")
        assert len(chunks(seen, "agent_message_chunk")) >= 42

        answer = elsewhere.answer_to(elsewhere.prompt(session_id, "/echo on the second host"))
        assert answer["result"] == {"stopReason": "end_turn"}
    finally:
        second.stop()
        if first.process.proc.poll() is None:
            first.stop()
    usage = subprocess.run([sys.executable, "-m", "acp_green", "usage", "--store", postgres_url, "--json", "--records"],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0, usage.stderr
    stops = [r["stopReason"] for r in json.loads(usage.stdout)["records"] if r["sessionId"] == session_id]
    assert stops == ["end_turn"] * 4, stops
    listed = subprocess.run([sys.executable, "-m", "acp_green", "sessions", "show", session_id, "--store", postgres_url],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("\nturn ") == 4 and "on the second host" in listed.stdout
