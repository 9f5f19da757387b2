"""S10, hostile input: a wait of NaN seconds never freezes the agent.

gevent's hub stops serving every greenlet once a timer of NaN seconds is started (an
`Event.wait(nan)` never returns, and nothing else runs). A client can ask for one by text —
`/sleep nan`, `_acp_green/sleep {"seconds": "nan"}`, the demo tool `sleep` — so the cancel
token, which every wait of a turn, a tool call and an extension goes through, refuses it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.e2e.test_bad_input import assert_serves_a_prompt, start


def test_a_nan_wait_is_refused_and_the_hub_runs_on_S10():
    """S10: CancelToken.wait(nan) raises at once instead of wedging the hub; other greenlets run.

    In a child process: under the wedge nothing in this process would run again.
    """
    program = textwrap.dedent("""
        import gevent
        from acp_green.rpc.cancel import CancelToken
        ticks = []
        gevent.spawn(ticks.append, 1)
        try:
            CancelToken().wait(float("nan"))
        except ValueError:
            pass
        gevent.sleep(0)
        assert ticks == [1], ticks
        assert CancelToken().wait(0) is False
        print("served")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "served", done.stderr


@pytest.mark.parametrize("text", ["/sleep nan", "/sleep NaN", "/sleep -nan"])
def test_sleep_nan_prompt_is_answered_and_the_agent_serves_on_cli_S10(launch, text):
    """S10: `/sleep nan` ends its turn at once (usage) and the same connection still serves."""
    agent = start(launch)
    session_id = agent.new_session()
    assert agent.prompt(session_id, text).result(timeout=30) == {"stopReason": "end_turn"}
    assert_serves_a_prompt(agent)


def test_sleep_extension_with_nan_seconds_is_refused_and_the_agent_serves_on_cli_S10(launch):
    """S10: `_acp_green/sleep` with "nan" seconds is answered (an error), never a frozen agent."""
    agent = start(launch)
    response = agent.request("_acp_green/sleep", {"seconds": "nan"}).response(timeout=30)
    assert "error" in response, response
    assert_serves_a_prompt(agent)


def test_a_request_waited_for_nan_seconds_is_refused_and_forgotten_S10():
    """S10: `turn.request(..., timeout=nan)` (OutgoingRequests.wait) raises instead of wedging the
    hub, and the request leaves the table, so a late reply finds nothing. In a child process."""
    program = textwrap.dedent("""
        import gevent
        from acp_green.rpc.outgoing import OutgoingRequests
        sent = []
        requests = OutgoingRequests(lambda *a: sent.append(a), lambda *a: None, lambda m, e: RuntimeError(e))
        ticks = []
        gevent.spawn(ticks.append, 1)
        try:
            requests.call("fs/read_text_file", {}, timeout=float("nan"))
        except ValueError:
            pass
        gevent.sleep(0)
        assert ticks == [1] and len(requests) == 0 and len(sent) == 1, (ticks, len(requests), sent)
        assert requests.resolve(0, {}) is None
        print("served")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "served", done.stderr
