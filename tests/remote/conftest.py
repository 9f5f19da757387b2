"""A listening agent per test, stopped at teardown: it must exit 0 on SIGTERM, and what it sent
every WebSocket peer must pass ACP's schemas."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.remote_peers import ListeningAgent


@pytest.fixture
def listening(tmp_path) -> Iterator[Callable[..., ListeningAgent]]:
    started: list[ListeningAgent] = []

    def start(*args: str, **kwargs: object) -> ListeningAgent:
        if "--ephemeral" not in args and "--state-dir" not in args:
            args = (*args, "--state-dir", str(tmp_path / f"state{len(started)}"))
        agent = ListeningAgent(*args, **kwargs)  # type: ignore[arg-type]
        started.append(agent)
        return agent

    yield start
    problems = []
    for agent in started:
        code = agent.stop()
        if code != 0:
            problems.append(f"exit code {code}: {agent.stderr_lines[-10:]}")
        problems.extend(agent.schema_problems())
    assert not problems, problems
