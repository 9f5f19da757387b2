"""A listening agent per test, stopped at teardown: it must exit 0 on SIGTERM, and what it sent
every WebSocket peer must pass ACP's schemas. `served`: one served in this process instead, on
ListenOptions a test chooses (short clocks, small bounds)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import gevent
import pytest

from acp_green.demo import DemoAgent
from acp_green.remote import ListenOptions, RemoteListener
from acp_green.serve_options import ServeOptions
from acp_green.server import Server
from tests.remote_peers import ListeningAgent

BOUND = 30


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
            problems.append(f"exit code {code}: {agent.process.stderr[-2000:]}")
        problems.extend(agent.schema_problems())
    assert not problems, problems


@pytest.fixture
def served() -> Iterator[Callable[..., tuple[Server, RemoteListener]]]:
    """Serve the demo in this process with `ListenOptions(**listen)`; stopped at teardown, exit 0."""
    running = []

    def start(**listen) -> tuple[Server, RemoteListener]:
        server = Server(DemoAgent(), ServeOptions(handle_signals=False, ephemeral=True, shutdown_grace=1))
        listener = RemoteListener(ListenOptions(**listen))
        greenlet = gevent.spawn(server.serve_listening, listener)
        with gevent.Timeout(BOUND):
            while listener.routes is None:
                gevent.sleep(0.01)
        running.append((server, greenlet))
        return server, listener

    yield start
    for server, greenlet in running:
        server.request_stop("test over")
        greenlet.join(timeout=BOUND)
        assert greenlet.dead and greenlet.value == 0
