"""A pytest plugin for authors of agents built on acp_green: prove your own agent behaves.

Enable it in conftest.py with `pytest_plugins = ["acp_green.testing"]` (an installed acp_green
also registers it as the `pytest11` entry point `acp_green`). The fixture `acp_connect` serves
your agent (in process for an `Agent`, as a subprocess for a command line) to a scripted
editor; when the test ends the agent is stopped and every line that passed is checked by the
rig's invariants and the ACP schema, and a broken rule fails the test, named and quoted.
docs/TESTING.md is the guide.

Importing this module loads neither gevent nor the rig: they load when a test first connects.
PYTEST_DONT_REWRITE: the plugin's own asserts are left as written, so pytest does not warn when
a conftest.py or `-W error::acp_green.testing.AcpAdvisory` imported it before loading it as a plugin.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .turns import ToolCallView, TurnResult

if TYPE_CHECKING:
    from ..tools.rig.client import RpcErrorResponse as RpcErrorResponse
    from .client import AgentClient as AgentClient, RunningTurn as RunningTurn
    from .probe import ProbeResult as ProbeResult, run_probe as run_probe
    from .serving import AcpAdvisory as AcpAdvisory, Connections

__all__ = ["AcpAdvisory", "AgentClient", "ProbeResult", "RpcErrorResponse", "RunningTurn", "ToolCallView", "TurnResult",
           "acp_connect", "run_probe"]

# Loaded on first use, so that a pytest run with the entry point active imports gevent only if a test connects.
_LAZY = {"AgentClient": ".client", "RunningTurn": ".client", "ProbeResult": ".probe", "run_probe": ".probe",
         "AcpAdvisory": ".serving", "RpcErrorResponse": "..tools.rig.client"}
_CONNECTIONS = pytest.StashKey["Connections"]()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp_green", "acp_green.testing: the agent under test")
    group.addoption("--acp-agent-url", metavar="URL", default=None,
                    help="Reach the agent at URL (ws://, wss://, http://, https://: `acp-green serve --listen`) in every "
                         "acp_connect(...) of the run, instead of serving the agent each test names; the same checks run, "
                         "less those of a process. Token: --acp-agent-header or $ACP_GREEN_TOKEN.")
    group.addoption("--acp-agent-header", metavar="'NAME: VALUE'", action="append", default=[],
                    help="A header every request to --acp-agent-url carries (repeatable), e.g. 'Authorization: Bearer T'.")


@pytest.fixture
def acp_connect(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., AgentClient]]:
    """`acp_connect(agent, *, permissions="allow", files=None, cwd=None, capabilities=None,
    elicitation=None, timeout=30.0)`: serve `agent` and return an initialized `AgentClient`.

    `agent`: an `Agent` subclass (made with no arguments) or instance, served in process by the
    real server over real pipes; a command line (list of str), run as a subprocess; or the URL of
    an agent serving ACP over the network (`acp-green serve --listen`: ws://, wss://, http://,
    https://), with `headers=` (e.g. {"Authorization": "Bearer T"}) for its requests.
    `pytest --acp-agent-url URL` reaches that agent in every call instead of serving the one named.
    `permissions`: "allow", "reject", or a callable given each request's params returning
    "allow", "reject", an optionId or None (cancelled). `files`: relative path -> text, written
    into the directory the editor serves (a fresh temporary one, or `cwd`; sessions start there).
    `capabilities`: the clientCapabilities (default: files, terminals and forms).
    `elicitation`: form results in order, or a callable given each request's params.
    `timeout`: the bound of every wait. `serve_options`: the in-process server's `ServeOptions`.

    Every agent is stopped when the test function returns and checked then: a broken rule
    fails the test itself. An agent still running at teardown (the test raised) is checked there.
    """
    from .serving import Connections

    connections = Connections(lambda: tmp_path_factory.mktemp("acp"), request.config.getoption("acp_agent_url", None),
                              request.config.getoption("acp_agent_header", None) or ())
    request.node.stash[_CONNECTIONS] = connections
    yield connections.connect
    failure = connections.stop_and_check()
    if failure is not None:
        pytest.fail(failure, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Stop and check the test's agents as soon as its function returns, so that what they broke
    fails the test (in its teardown it would be reported as an error beside a pass)."""
    result = yield  # a test that raised skips this: its fixture's teardown stops and checks the agents
    connections = item.stash.get(_CONNECTIONS, None)
    if connections is not None:
        failure = connections.stop_and_check()
        if failure is not None:
            pytest.fail(failure, pytrace=False)
    return result
