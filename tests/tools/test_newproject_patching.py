"""A project made by `acp-green new` stays monkey-patched when its agent imports an HTTP library at
the top of agent.py (ssl, urllib.request, requests: what used to turn `serve_stdio`'s patching
off): served through its own entry point, one session held in a plain blocking socket read does
not hold another, which is answered meanwhile."""

from __future__ import annotations

import socket
import sys
import tomllib
from pathlib import Path

from acp_green.tools.newproject.project import check_name, make_project
from tests.helpers import REPO

# The generated agent.py, rewritten as many real ones start: an HTTP library imported at the top.
AGENT = '''"""A project's agent that imports an HTTP library at its top and blocks in a plain socket read."""

from __future__ import annotations

import os
import socket
import ssl  # noqa: F401 (what an HTTP client imports)
import urllib.request  # noqa: F401

try:
    import requests  # noqa: F401
except ImportError:  # not installed here: ssl and urllib.request stand for it
    pass

from acp_green import Agent, Turn


class {class_name}(Agent):
    name = "relay-bot"

    def prompt(self, turn: Turn) -> str:
        if turn.text == "block":
            turn.say("blocking")
            with socket.create_connection(("127.0.0.1", int(os.environ["BLOCK_PORT"]))) as connection:
                connection.recv(1)  # plain blocking code: only patching lets the other sessions run meanwhile
        turn.say(f"{{turn.text}}: done")
        return "end_turn"
'''


def entry_point_command(project: Path, name: str) -> list[str]:
    """What the console script pip writes for the project's [project.scripts] entry runs: import it, call it."""
    scripts = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, function = scripts[name].partition(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function}; sys.exit({function}())", "--ephemeral"]


def test_the_entry_point_patches_before_the_agent_imports_an_http_library(launch, tmp_path):
    project = tmp_path / "relay-bot"
    names = check_name("relay-bot")
    make_project("relay-bot", project, llm=False, editor_settings=lambda command, env: [])
    (project / names.module / "agent.py").write_text(AGENT.format(class_name=names.class_name), encoding="utf-8")
    holder = socket.create_server(("127.0.0.1", 0))
    holder.settimeout(60)  # generous: the agent's read arrives within it, or the test fails saying so
    held: socket.socket | None = None
    agent = launch(command=entry_point_command(project, "relay-bot"),
                   env={"PYTHONPATH": f"{project}:{REPO}", "BLOCK_PORT": str(holder.getsockname()[1])})
    try:
        agent.initialize()
        blocked_session, other_session = agent.new_session(), agent.new_session()
        blocked = agent.prompt(blocked_session, "block")
        held, _ = holder.accept()  # the agent is in its read now, and stays there until the test writes
        answered = agent.prompt(other_session, "hello").result()
        assert not blocked.done, "the blocked session ended first: the other one waited for it"
        assert answered == {"stopReason": "end_turn"}
        held.sendall(b"x")
        assert blocked.result() == {"stopReason": "end_turn"}
    finally:
        if held is not None:
            held.close()  # a failed test lets the read end too, so the agent can be stopped
        holder.close()
    agent.close()
    assert "the event loop is blocked" not in agent.stderr_text()
