"""Serving the agent under test, in process or as a subprocess, and judging the wire when it stops.

In process, the real `Server` runs the author's `Agent` in a greenlet on two `os.pipe()`s, the
test's client on the other ends. As a subprocess, the rig's `CheckedAgent` runs the author's
command line. Either way, stopping closes the agent's input (EOF), waits for it to finish, and
runs the rig's `InvariantChecker` (schema validation included) over every line that passed.
An agent at a URL (`acp-green serve --listen`, ws:// or http://) is reached by the same
`CheckedAgent` over the rig's link (tools/rig/remote_link.py): stopping ends its connection, and
the same checks run, less those of a process (its exit, its descendants). The client keeps the
last KEPT_RECORDS of what passed; each line is checked before it is dropped.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gevent.greenlet import Greenlet

from ..agent import Agent
from ..server import ServeOptions, Server
from ..tools.rig.client import AcpClient
from ..tools.rig.invariants import InvariantChecker, Violation
from ..tools.rig.remote_link import is_agent_url, shown_command
from ..tools.rig.run import EXIT_TIMEOUT, CheckedAgent
from .client import AgentClient
from .editor import Editor, ElicitationAnswers, PermissionAnswer

__all__ = ["AcpAdvisory", "Connections", "KEPT_RECORDS", "RULES"]

#: The rule each invariant stands for, said in the failure message beside the invariant's name.
RULES = {
    "valid_json_rpc": "JSON-RPC 2.0: every line the agent writes on stdout is one JSON-RPC message",
    "schema": "ACP: every message matches the ACP JSON Schema",
    "one_response_per_request": "JSON-RPC: every request gets exactly one response (S4, S13)",
    "no_response_to_notification": "S6: a notification is never answered",
    "prompt_updates_in_order": "S5: a prompt's updates leave in order",
    "no_update_after_response": "S5: nothing is sent for a session after its prompt's response",
    "cancelled_answers_cancelled": "S14: a cancelled prompt answers stopReason \"cancelled\"",
    "exit_after_eof": "S13: the agent exits once its input closes",
    "no_orphan_processes": "S13: no process the agent started outlives it",
    "absolute_paths": "ACP: every file path the agent sends the client is absolute",
    "capabilities_respected": "ACP: a boolean config option only to a v1 client that advertised session.configOptions.boolean",
}


class AcpAdvisory(UserWarning):
    """What real clients trip on although ACP allows it (a tool call left open at the turn's end...): a warning, never a failure."""


#: What a test's client keeps of the lines that passed (RecordLog, by record_cost): the last
#: 32 MiB's worth, each line handed to the checker before it is dropped, so an agent that floods
#: is judged whole in bounded memory. A turn read back (`TurnResult`) holds what is still kept.
KEPT_RECORDS = 32 << 20


def _checked_as_kept(rpc: AcpClient, checker: InvariantChecker) -> None:
    """Keep only the client's last KEPT_RECORDS, the checker fed each record before it is dropped."""
    records = rpc.keep_at_most(KEPT_RECORDS)
    records.before_drop.append(lambda: checker.update(records))


class _InProcess:
    """A `Server` on pipes in this process, with the rig's client on the other ends."""

    def __init__(self, agent: Agent, options: ServeOptions) -> None:
        to_agent_r, to_agent_w = os.pipe()
        from_agent_r, from_agent_w = os.pipe()
        self.fds = (to_agent_r, from_agent_w)
        self.server = Server(agent, options)
        self.greenlet = Greenlet(self.server.serve, to_agent_r, from_agent_w)
        self.greenlet.name = "acp_green.testing-server"
        self.greenlet.start()
        self.ends = (from_agent_r, to_agent_w)
        self.checker = InvariantChecker()  # fed as records are dropped (_checked_as_kept), and at the end

    def stop(self, rpc: AcpClient, bound: float) -> tuple[list[Violation], list[Violation], str]:
        rpc.close_input()
        self.greenlet.join(timeout=bound)
        checker = self.checker
        if not self.greenlet.dead:
            checker.add("exit_after_eof", f"the in-process server was still serving {bound:g}s after its input closed")
            self.greenlet.kill(block=True, timeout=5)
        for fd in self.fds:  # the server's ends: the client then reads to EOF
            try:
                os.close(fd)
            except OSError:
                pass
        rpc.eof.wait(bound)
        rpc.stop()
        checker.finish(rpc.records, complete=True)  # it read to EOF: every request is owed its answer (S13)
        return list(checker.violations), list(checker.advisories), ""


#: Starts one run of the agent under test: its client, and the in-process server when there is one.
Start = Callable[[], "tuple[AcpClient | CheckedAgent, _InProcess | None]"]
#: One run stopped and checked: (its number, violations, advisories, the end of its stderr).
RunChecked = tuple[int, list[Violation], list[Violation], str]


class _Connection:
    """One agent under test and its client, across the client's restarts: each run is stopped and
    checked on its own, and what every run broke is reported when the test ends."""

    def __init__(self, name: str, start: Start, bound: float) -> None:
        self.name = name
        self.bound = bound
        self._start = start
        self.rpc, self.inprocess = start()
        self.runs = 1
        self.checked: list[RunChecked] = []
        self.stopped = False

    def stop(self) -> None:
        """Stop the running agent (once) and keep what its run broke for the end of the test."""
        if self.stopped:
            return
        self.stopped = True
        rpc = self.rpc
        if self.inprocess is not None:
            assert isinstance(rpc, AcpClient)
            violations, advisories, stderr = self.inprocess.stop(rpc, self.bound)
        else:
            assert isinstance(rpc, CheckedAgent)
            result = rpc.finish()
            violations, advisories, stderr = result.violations, result.advisories, result.stderr_tail
        self.checked.append((self.runs, list(violations), list(advisories), stderr))

    def restart(self) -> AcpClient | CheckedAgent:
        """Stop the agent, then start it again as it was first started; the new run's client."""
        self.stop()
        self.rpc, self.inprocess = self._start()
        self.runs += 1
        self.stopped = False
        return self.rpc

    def run_name(self, run: int) -> str:
        return self.name if self.runs == 1 else f"{self.name} (run {run} of {self.runs})"

    @property
    def remote(self) -> bool:
        return isinstance(self.rpc, CheckedAgent) and self.rpc.remote is not None


class Connections:
    """Every agent one test started; `stop_and_check` ends them all and says what they broke."""

    def __init__(self, directory: Callable[[], Path], agent_url: str | None = None, agent_headers: Sequence[str] = ()) -> None:
        self._directory = directory  # a fresh temporary directory per call (the workspace, a state home)
        self._running: list[tuple[_Connection, AgentClient]] = []
        #: `--acp-agent-url`: every connect reaches the agent there instead of serving the one named.
        self._agent_url = agent_url
        self._agent_headers = list(agent_headers)

    def connect(self, agent: type[Agent] | Agent | Sequence[str] | str, *, permissions: PermissionAnswer = "allow",
                files: Mapping[str, str] | None = None, cwd: str | None = None, capabilities: Mapping[str, Any] | None = None,
                elicitation: ElicitationAnswers | None = None, timeout: float = 30.0,
                serve_options: ServeOptions | None = None, headers: Mapping[str, str] | None = None) -> AgentClient:
        """Serve `agent` (in process for an `Agent` class or instance, else run the command line, or
        reach the agent at a URL), initialize a client for it, and return the client."""
        root = Path(cwd) if cwd is not None else self._directory()
        editor = Editor(root, permissions=permissions, files=files, capabilities=capabilities, elicitation=elicitation)
        policy = editor.policy()  # one for every run: scripted answers go on in order across restarts
        start: Start
        standing_for = ""
        if self._agent_url is not None:
            standing_for = f" (for {_named(agent)}: --acp-agent-url)"
            agent = [self._agent_url, *(word for value in self._agent_headers for word in ("--header", value))]
            headers = None  # the run's --acp-agent-header options stand for the test's
        if isinstance(agent, str) and is_agent_url(agent):
            agent = [agent, *(word for name, value in (headers or {}).items() for word in ("--header", f"{name}: {value}"))]
        elif headers:
            raise TypeError(f"acp_connect: headers= is for an agent at a URL, not {agent!r}")
        if isinstance(agent, type) and issubclass(agent, Agent) or isinstance(agent, Agent):
            made = agent

            def start() -> tuple[AcpClient | CheckedAgent, _InProcess | None]:
                # A class is made afresh each run, as a process would; an instance is served again as it is.
                served = _InProcess(made() if isinstance(made, type) else made, options)
                client = AcpClient(*served.ends, policy)
                _checked_as_kept(client, served.checker)
                return client, served

            # Never the process's signals: they belong to the test run.
            options = replace(serve_options or ServeOptions(ephemeral=True), handle_signals=False)
            name = f"{agent.__name__ if isinstance(agent, type) else type(agent).__name__} (in process)"
            bound = options.shutdown_grace + max(timeout, 10.0)
        elif isinstance(agent, (list, tuple)) and agent and all(isinstance(a, str) for a in agent):
            command = list(agent)
            remote = is_agent_url(command[0])
            # The same state home every run: what the agent stored before a restart is there after it.
            env = None if remote else {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_STATE_HOME": str(self._directory())}
            exit_timeout = max(timeout, EXIT_TIMEOUT)  # how long it may take to exit after EOF

            def start() -> tuple[AcpClient | CheckedAgent, _InProcess | None]:
                checked = CheckedAgent(command, policy, env=env)
                checked.exit_timeout = exit_timeout
                _checked_as_kept(checked.client, checked.checker)
                return checked, None

            name = " ".join(shown_command(command)) + standing_for
            bound = exit_timeout
        else:
            raise TypeError("acp_connect takes an Agent subclass, an Agent, a command line (a list of str) or an agent's URL "
                            f"(ws://, wss://, http://, https://), not {agent!r}")
        connection = _Connection(name, start, bound)
        client = AgentClient(connection.rpc, editor, cwd=str(editor.root), timeout=timeout, runs=connection)
        self._running.append((connection, client))
        client.initialize()
        return client

    def stop_and_check(self) -> str | None:
        """Stop every agent still running; the failure message when any run of any broke a rule, else None.

        Advisories become `AcpAdvisory` warnings once every agent has stopped (a warnings filter
        may make them raise), and only when nothing failed."""
        running, self._running = self._running, []
        failures = []
        advisories: list[str] = []
        for connection, client in running:
            connection.stop()
            problems = [f"the test's own script: {p}" for p in client.editor.problems]
            for run, violations, advised, stderr in connection.checked:
                name = connection.run_name(run)
                advisories += [f"{name}: {advisory}" for advisory in advised]
                if violations or (problems and run == connection.runs):  # the script's problems once, with the last run
                    failures.append(_failure(name, violations, problems if run == connection.runs else [], stderr,
                                             connection.remote))
        if failures:
            return "\n\n".join(failures)
        for advisory in advisories:
            warnings.warn(AcpAdvisory(advisory), stacklevel=2)
        return None


def distinct(violations: Sequence[Violation]) -> list[tuple[Violation, int]]:
    """Each violation once (by rule and detail), with how often it was seen."""
    seen: dict[tuple[str, str], tuple[Violation, int]] = {}
    for violation in violations:
        first, count = seen.get((violation.invariant, violation.detail), (violation, 0))
        seen[(violation.invariant, violation.detail)] = (first, count + 1)
    return list(seen.values())


def _named(agent: Any) -> str:
    """The agent a test named, in a few words (`NotesAgent`, `python -m notes`)."""
    if isinstance(agent, type):
        return agent.__name__
    if isinstance(agent, Agent):
        return type(agent).__name__
    if isinstance(agent, (list, tuple)):
        return " ".join(shown_command([str(a) for a in agent]))
    return shown_command([str(agent)])[0]


def _failure(name: str, violations: Sequence[Violation], problems: Sequence[str], stderr: str, remote: bool = False) -> str:
    """The message a failing test shows: each broken rule named, and the lines that broke it quoted."""
    breaks = distinct(violations)  # the same break seen again is counted, not repeated
    lines = [f"the agent {name} broke {len(breaks)} ACP rule(s) (checked once the test was over: each rule named, "
             "the lines that broke it quoted)" if violations else f"the agent {name}: the test's own script went wrong"]
    for violation, count in breaks:
        rule = RULES.get(violation.invariant, violation.invariant)
        lines.append(f"\n{violation.invariant} ({rule}): {violation.detail}")
        lines.extend(f"    {message}" for message in violation.messages)
        if count > 1:
            lines.append(f"    (seen {count} times)")
    lines.extend(f"\n{problem}" for problem in problems)
    if stderr.strip():
        whose = "the link to the agent says" if remote else "the agent's stderr ends"
        lines.append(f"\n{whose}:\n" + "\n".join("    " + line for line in stderr.strip().splitlines()[-10:]))
    return "\n".join(lines)
