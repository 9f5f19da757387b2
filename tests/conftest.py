"""Shared fixtures: agents over real pipes, in-process servers, and the checks every test gets.

Every test runs under a gevent.Timeout, fails if a greenlet raised an unexpected error in the
hub, and every agent a test launches is checked at teardown: its messages pass strict schema
validation, the rig's invariants hold (one response per request, nothing answered for
a notification, no update after a prompt's response...) and no process of its group is left
behind. A test that breaks an invariant on purpose says which and why:
`@pytest.mark.breaks_invariants("one_response_per_request", reason="...")`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import gevent
import pytest
from gevent.greenlet import Greenlet

from acp_green.agent import Agent
from acp_green.tools.rig.client import AcpClient, AgentProcess, ClientPolicy
from acp_green.server import ServeOptions, Server
from acp_green.rpc.transport import OutputLimits
from tests.helpers import group_members, invariant_problems, stream_schema_problems, tolerated_invariants
from tests.postgres_server import PostgresUnavailable, create_database, drop_database, server_url
from tests.unit_harness import unit  # noqa: F401 - the unit layer's fixture, for every test module

# The plugin for agent authors (docs/TESTING.md): `acp_connect`, where a test of ours is written as
# an author would write it. An installed acp_green loads it by its pytest11 entry point too.
pytest_plugins = ["acp_green.testing"]

TEST_TIMEOUT = 120


@pytest.fixture(autouse=True)
def _hub_errors_fail_the_test() -> Iterator[None]:
    """A greenlet that died of an unexpected exception fails the test (gevent's own harness does this)."""
    hub = gevent.get_hub()
    errors: list[Any] = []
    original = hub.handle_error

    def record(context: Any, etype: Any, value: Any, tb: Any) -> None:
        if not issubclass(etype, hub.NOT_ERROR):
            errors.append((context, etype, value))
        original(context, etype, value, tb)

    hub.handle_error = record
    timeout = gevent.Timeout(TEST_TIMEOUT)
    timeout.start()
    try:
        yield
    finally:
        timeout.close()
        hub.handle_error = original
    assert not errors, f"greenlets failed in the hub: {errors}"


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "acp_green", "serve", *args]


def schema_problems(client: AcpClient) -> list[str]:
    """Every problem in what the agent wrote, checked against the ACP schemas."""
    return stream_schema_problems(client.records) + null_id_problems(client)


#: The only errors that may be answered with id null: the line's id could not be read.
NULL_ID_CODES = (-32700, -32600)


def null_id_problems(client: AcpClient) -> list[str]:
    """Errors with id null other than -32700/-32600, unless the client sent a request with id null
    (a notification is never answered, S6; a readable id is echoed, S4)."""
    sent_null_id = False
    for record in client.records:
        if record.direction != "out":
            continue
        messages = [record.message] if record.message is not None else _decodable_lines(record.raw)
        sent_null_id = sent_null_id or any(isinstance(m, dict) and "method" in m and "id" in m and m["id"] is None for m in messages)
    if sent_null_id:
        return []
    return [
        f"error {record.message['error'].get('code')} answered with id null: {record.raw[:200]!r}"
        for record in client.records
        if record.direction == "in" and isinstance(record.message, dict) and "method" not in record.message
        and record.message.get("id", 0) is None and isinstance(record.message.get("error"), dict)
        and record.message["error"].get("code") not in NULL_ID_CODES
    ]


def _decodable_lines(raw: bytes) -> list[Any]:
    decoded = []
    for line in raw.splitlines():
        try:
            decoded.append(json.loads(line))
        except (ValueError, RecursionError):  # what the client sent may be hostile (deep nesting)
            pass
    return decoded


@pytest.fixture(autouse=True, scope="session")
def _state_never_in_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test writes to the real ~/.local/state: the default state dir points into tmp."""
    previous = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if previous is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = previous


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The URL of the test PostgreSQL server (tests/postgres_server.py). Session-scoped, so that
    starting it (even installing it) happens before, not within, a test's TEST_TIMEOUT."""
    try:
        return server_url()
    except PostgresUnavailable as error:
        problem = str(error)
    pytest.fail(problem, pytrace=False)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """The URL of a fresh, empty database on a real PostgreSQL server, dropped after the test.
    Never skips: without a server the test fails, saying why."""
    try:
        url = create_database(postgres_server)
    except PostgresUnavailable as error:
        problem = str(error)
    else:
        yield url
        drop_database(url)
        return
    pytest.fail(problem, pytrace=False)  # outside the except: the message alone, not a chained traceback


@pytest.fixture
def launch(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Callable[..., AgentProcess]]:
    """Start `acp-green serve` (or any command) over real pipes; checked and reaped at teardown.

    Each test's agents get their own default state dir (XDG_STATE_HOME in a tmp dir), so an
    agent launched without --state-dir never writes to the home directory.
    """
    started: list[tuple[AgentProcess, bool]] = []
    state_home = str(tmp_path_factory.mktemp("state-home"))

    def start(*args: str, command: list[str] | None = None, policy: ClientPolicy | None = None,
              check_schema: bool = True, env: dict[str, str] | None = None) -> AgentProcess:
        full_env = dict(os.environ)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        full_env["XDG_STATE_HOME"] = state_home
        if env:
            full_env.update(env)
        agent = AgentProcess(command or serve_command(*args), policy, env=full_env)
        started.append((agent, check_schema))
        return agent

    tolerated = tolerated_invariants(request)
    yield start
    failures = []
    for agent, check_schema in started:
        agent.close()
        survivors = group_members(agent.pid)
        if survivors:
            os.killpg(agent.pid, signal.SIGKILL)
            failures.append(f"processes {survivors} of {agent.command} outlived the agent")
        if check_schema and "schema" not in tolerated:
            problems = schema_problems(agent)
            if problems:
                failures.append(f"schema problems in {agent.command}: {problems[:5]}")
        violations = invariant_problems(agent.records, tolerated)
        if violations:
            failures.append(f"invariants broken by {agent.command}: {violations[:5]}")
    assert not failures, failures


class InProcess:
    """A Server on os.pipe() descriptors in this process, with a client on the other ends."""

    def __init__(self, agent: Agent, options: ServeOptions, policy: ClientPolicy | None = None, store: Any = None) -> None:
        to_agent_r, to_agent_w = os.pipe()
        from_agent_r, from_agent_w = os.pipe()
        self._fds = [to_agent_r, from_agent_w]
        self.server = Server(agent, options, store)
        self.exit_code: int | None = None
        self.greenlet = Greenlet(self._run, to_agent_r, from_agent_w)
        self.greenlet.start()
        self.client = AcpClient(from_agent_r, to_agent_w, policy)

    def _run(self, read_fd: int, write_fd: int) -> None:
        self.exit_code = self.server.serve(read_fd, write_fd)

    def finish(self, timeout: float = 30) -> int | None:
        self.client.close_input()
        self.greenlet.join(timeout=timeout)
        assert self.greenlet.dead, "the in-process server did not stop after EOF"
        for fd in self._fds:  # the server's ends: the client then reads to EOF
            try:
                os.close(fd)
            except OSError:
                pass
        self.client.eof.wait(timeout)
        self.client.stop()
        return self.exit_code


@pytest.fixture
def inprocess(request: pytest.FixtureRequest) -> Iterator[Callable[..., InProcess]]:
    """Run an agent in this process on pipes; the server is stopped and checked at teardown."""
    running: list[InProcess] = []

    def start(agent: Agent, policy: ClientPolicy | None = None, store: Any = None, **options: Any) -> InProcess:
        """`store` or `state_dir=` for a persistent run; otherwise the server is --ephemeral."""
        options.setdefault("handle_signals", False)
        if "state_dir" not in options:
            options.setdefault("ephemeral", True)
        if "output" not in options:
            options["output"] = OutputLimits()
        harness = InProcess(agent, ServeOptions(**options), policy, store)
        running.append(harness)
        return harness

    tolerated = tolerated_invariants(request)
    yield start
    problems = []
    for harness in running:
        if not harness.greenlet.dead:
            harness.finish()
        if "schema" not in tolerated:
            problems.extend(schema_problems(harness.client))
        # The server read to EOF: every request it was sent is owed an answer.
        problems.extend(invariant_problems(harness.client.records, tolerated, complete=True))
        problems.extend(f"greenlet left behind: {g}" for g in leftover_greenlets(harness.server))
    assert not problems, problems


def leftover_greenlets(server: Server) -> list[Any]:
    """Greenlets of this server still alive after it returned (none may be)."""
    import gc

    endpoint = server.protocol.endpoint if server.protocol else None
    alive = [g for g in (endpoint.greenlets() if endpoint else [])]
    alive += [g for g in gc.get_objects() if _is_live_greenlet(g) and getattr(g, "name", "").startswith("acp-")]
    return [g for g in alive if not g.dead]


def _is_live_greenlet(thing: Any) -> bool:
    """A live Greenlet; a weak proxy whose referent is gone (psycopg keeps some) is none."""
    try:
        return isinstance(thing, Greenlet) and not thing.dead
    except ReferenceError:
        return False
