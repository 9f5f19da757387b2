"""The one cancellation token (acp_green/rpc/cancel.py): one name for "is it set", NaN refused, bottom layer."""

from __future__ import annotations

import subprocess
import sys

import gevent

from acp_green.rpc import outgoing
from acp_green.rpc.cancel import CancelToken


def test_is_set_is_the_one_name_for_a_set_token():
    token = CancelToken()
    assert token.is_set() is False
    token.set()
    assert token.is_set() is True
    assert not hasattr(token, "cancelled"), "the token answers 'is it set' by is_set() alone"


def test_a_wait_times_out_or_ends_when_set():
    # A NaN wait is refused: tests/test_nan_wait.py checks it in a child (broken, it stops the hub).
    token = CancelToken()
    assert token.wait(0) is False
    gevent.spawn_later(0.01, token.set)
    assert token.wait(10) is True


def test_the_session_and_the_pending_table_use_the_token_from_cancel_py():
    # No second declaration of the idea (a Protocol in outgoing, a class in sessions).
    assert not hasattr(outgoing, "CancelSignal")
    from acp_green import sessions

    assert sessions.CancelToken is CancelToken


def test_cancel_py_imports_nothing_above_the_bottom_layer():
    code = (
        "import sys, acp_green.rpc.cancel; "
        # The packages themselves load acp_green.version (its __version__, a constant of the bottom
        # layer) and acp_green.rpc (a docstring).
        "print(sorted(m for m in sys.modules if m.startswith('acp_green.') and m not in ('acp_green.rpc', 'acp_green.rpc.cancel', 'acp_green.version')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", f"importing acp_green.rpc.cancel loaded {loaded}"
