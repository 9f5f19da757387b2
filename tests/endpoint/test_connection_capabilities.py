"""ConnectionSnapshot reads the client's capabilities strictly: only a JSON `true` advertises one."""

from __future__ import annotations

import pytest

from acp_green.context import ConnectionContext


@pytest.mark.parametrize(("terminal", "advertised"), [(True, True), (False, False), (1, False), ("true", False), (None, False)])
def test_only_terminal_true_advertises_a_terminal(terminal: object, advertised: bool) -> None:
    context = ConnectionContext()
    assert context.snapshot.has_terminal() is False
    context.initialized(1, {"terminal": terminal}, None)
    assert context.snapshot.has_terminal() is advertised
