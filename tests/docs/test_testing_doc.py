"""docs/TESTING.md stays true: its worked example, an author's whole test file, passes when run as
the guide says (the plugin enabled in conftest.py), and the names it documents exist."""

from __future__ import annotations

import os
import re

import pytest

from tests.helpers import REPO

pytest_plugins = ["pytester"]

DOC = (REPO / "docs" / "TESTING.md").read_text(encoding="utf-8")


def worked_example() -> str:
    """The python block of the doc that starts with `# test_notes_agent.py`."""
    return next(block for block in re.findall(r"```python\n(.*?)```", DOC, flags=re.S) if block.startswith("# test_notes_agent.py"))


def test_the_worked_example_passes(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest('pytest_plugins = ["acp_green.testing"]\n')
    pytester.makepyfile(test_notes_agent=worked_example())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=6)


def test_the_names_it_documents_exist() -> None:
    import acp_green.testing as testing

    for name in ("AgentClient", "RunningTurn", "TurnResult", "ToolCallView", "ProbeResult", "run_probe", "AcpAdvisory",
                 "RpcErrorResponse", "acp_connect"):
        assert name in testing.__all__ and getattr(testing, name) is not None, name
    for method in ("new_session", "prompt", "start_prompt", "cancel", "load_session", "call", "initialize_result", "received",
                   "workspace", "written", "terminals", "rpc"):
        assert f"`{method}" in DOC and (hasattr(testing.AgentClient, method) or method in ("initialize_result", "rpc")), method
    for method in ("wait_for_update", "cancel", "wait", "updates", "done"):
        assert hasattr(testing.RunningTurn, method), method
