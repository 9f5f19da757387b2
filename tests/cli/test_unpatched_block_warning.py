"""A process that serves unpatched and then blocks says why at WARNING: the block watchdog's
warning names the reason patching was not done when serving started (the `ssl` imported before
`serve_stdio`, or the opt-out) and the fix, not only the start-up note at INFO."""

from __future__ import annotations

import sys

from tests.helpers import REPO

BLOCKED = "the event loop is blocked"

SCRIPT = """
import sys, time
sys.path.insert(0, {repo!r})
{before}
from acp_green import Agent, ServeOptions, serve_stdio


class Sleeper(Agent):
    name = "sleeper"

    def prompt(self, turn):
        time.sleep(3)  # plain time.sleep: it holds the loop unless the process is patched
        return "end_turn"


raise SystemExit(serve_stdio(Sleeper(), ServeOptions(ephemeral=True, block_warning=0.2){extra}))
"""


def blocked_warning(launch, tmp_path, before: str = "", extra: str = "") -> str:
    """The first line of the watchdog's warning, after one blocking turn of the script's agent."""
    script = tmp_path / "entry.py"
    script.write_text(SCRIPT.format(repo=str(REPO), before=before, extra=extra), encoding="utf-8")
    agent = launch(command=[sys.executable, str(script)])
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "block").result() == {"stopReason": "end_turn"}
    agent.close()
    stderr = agent.stderr_text()
    assert BLOCKED in stderr, stderr
    return stderr[stderr.index(BLOCKED):].splitlines()[0]


def test_a_block_in_a_process_left_unpatched_after_ssl_says_why_and_the_fix(launch, tmp_path):
    warning = blocked_warning(launch, tmp_path, before="import ssl  # an HTTP library imported before serve_stdio")
    assert "not monkey-patched (serving could not patch it: ssl was imported already" in warning, warning
    assert "call gevent.monkey.patch_all() before any other import in the entry script" in warning, warning
    assert "acp-green serve --agent module:Class" in warning, warning


def test_a_block_in_a_process_told_not_to_patch_names_the_opt_out(launch, tmp_path):
    warning = blocked_warning(launch, tmp_path, extra=", monkey_patch=False")
    assert "not monkey-patched (patching was turned off (--no-monkey-patch, or monkey_patch=False))" in warning, warning
    assert "serve without it unless the agent is written for gevent throughout" in warning, warning
