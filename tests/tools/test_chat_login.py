"""`acp-green chat --authenticate ID`: an agent that refuses sessions until a login (as a project
made by `acp-green new` does) can be talked to; without the option, chat says in one line which
option and which ids would do it, instead of only quoting the refusal."""

from __future__ import annotations

import subprocess
import sys

CHAT = [sys.executable, "-m", "acp_green", "chat"]
AGENT = ["--", sys.executable, "-m", "acp_green", "serve", "--ephemeral", "--agent", "tests.agents:NeedsAuthAgent"]
BOUND = 120


def chat(lines: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CHAT, *options, *AGENT], input=lines, capture_output=True, text=True, timeout=BOUND)


def test_with_authenticate_chat_logs_in_and_talks():
    done = chat("hello\n", "--authenticate", "token")
    assert done.returncode == 0, done.stderr
    assert "authenticated hello" in done.stdout


def test_without_it_the_refusal_names_the_option_and_the_offered_ids():
    done = chat("hello\n")
    assert done.returncode == 1
    assert "run chat again with --authenticate ID, where ID is one of token" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_login_the_agent_does_not_offer_is_refused_naming_what_it_offers():
    done = chat("hello\n", "--authenticate", "password")
    assert done.returncode == 1
    assert "the agent offers no login password (its authMethods: token)" in done.stderr, done.stderr
