"""One agent process from launch to reaped, with every invariant checked along the way."""

from __future__ import annotations

import os
import signal as signals
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent import subprocess

from .client import AgentProcess, ClientPolicy, ClientSurface
from .forwarding import ForwardedAttribute, ForwardedMethod
from .invariants import InvariantChecker, Violation
from .reaper import Tracker, kill_all, new_run_mark, with_run_mark
from .remote_link import RemoteProcess

__all__ = ["CheckedAgent", "RunResult", "EXIT_TIMEOUT"]

# Generous: the runtime's shutdown grace is 5 s; a hang shows up as a violation, not a stuck rig.
EXIT_TIMEOUT = 15.0


@dataclass(slots=True)
class RunResult:
    """What one agent process did: exit code, violations, message counts."""

    exit_code: int | None
    violations: list[Violation]
    advisories: list[Violation]
    exercised: dict[str, int]
    messages_in: int
    messages_out: int
    prompts_answered: int
    cancelled_prompts: int
    stderr_tail: str = ""
    ended_by: str = "eof"
    # The agent did not exit after EOF and the rig killed it: its exit code is the rig's doing,
    # and what it started was not checked for orphans (a live agent's children are not orphans).
    killed: bool = False
    pid: int = 0  # 0 for a remote agent (a URL): no process of it runs here
    extra: dict[str, Any] = field(default_factory=dict)


class CheckedAgent(ClientSurface):
    """An `AgentProcess` (`process`) whose conversation runs through an `InvariantChecker`
    (`checker`) from launch to reaped; the process's surface and its client's are its own."""

    # -- the process's surface -------------------------------------------------------------
    command: ForwardedAttribute[list[str]] = ForwardedAttribute("process")
    remote: ForwardedAttribute[RemoteProcess | None] = ForwardedAttribute("process")
    tracker: ForwardedAttribute[Tracker | None] = ForwardedAttribute("process")
    pid: ForwardedAttribute[int | None] = ForwardedAttribute("process")
    proc: ForwardedAttribute[Any] = ForwardedAttribute("process")
    stderr: ForwardedAttribute[bytearray] = ForwardedAttribute("process")
    shown_command: ForwardedAttribute[str] = ForwardedAttribute("process")
    exited: ForwardedAttribute[bool] = ForwardedAttribute("process")
    stderr_text = ForwardedMethod("process", AgentProcess.stderr_text)
    kill = ForwardedMethod("process", AgentProcess.kill)
    memory_rss = ForwardedMethod("process", AgentProcess.memory_rss)
    open_fds = ForwardedMethod("process", AgentProcess.open_fds)
    survivors = ForwardedMethod("process", AgentProcess.survivors)
    wait_exit = ForwardedMethod("process", AgentProcess.wait_exit)
    close = ForwardedMethod("process", AgentProcess.close)

    def __init__(self, command: Sequence[str], policy: ClientPolicy | None = None, *,
                 env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        mark = new_run_mark()
        self.process = AgentProcess(command, policy, env=with_run_mark(env, mark), cwd=cwd)
        self.client = self.process.client
        if self.process.tracker is not None:
            self.process.tracker.mark = mark
        self.checker = InvariantChecker()
        self.ended_by = "eof"
        self.exit_timeout = EXIT_TIMEOUT
        # Whether a clean exit after EOF owes an answer to every request (S13). A probe that
        # judges this as an advisory of its own turns it off, so it is not counted twice.
        self.answers_owed_at_eof = True
        # What the final check owes, overriding the rule above when set (InvariantChecker.finish's
        # `complete`): the probe sets False, because ACP owes no answer to what is still running
        # when the client closes stdin; what it waited for in vain it reports itself (gave_up).
        self.owed_at_end: bool | str | None = None
        self._input_closed = False
        self._result: RunResult | None = None

    def check(self) -> list[Violation]:
        """Check what arrived since the last call (continuous checking); returns new violations."""
        return self.checker.update(self.records)

    def close_input(self) -> None:
        """Close the agent's stdin (EOF); `finish` then expects it to exit."""
        self._input_closed = True
        self.process.close_input()

    def signal(self, signum: int = signals.SIGTERM) -> None:
        """Send the agent a signal; one that ends it is how the run ended (`ended_by`)."""
        if signum in (signals.SIGTERM, signals.SIGINT, signals.SIGHUP):
            self.ended_by = signals.Signals(signum).name
        self.process.signal(signum)

    def finish(self, timeout: float | None = None) -> RunResult:
        """End the run: close stdin, expect an exit, look for survivors, run the final checks."""
        if self._result is not None:
            return self._result
        if self.remote is not None or self.tracker is None:
            return self._finish_remote(self.exit_timeout if timeout is None else timeout)
        checker = self.checker
        timeout = self.exit_timeout if timeout is None else timeout
        tracker = self.tracker
        pid = tracker.agent_pid
        tracker.snapshot()
        if not self._input_closed:
            self.close_input()
        code: int | None
        killed = False
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            checker.add("exit_after_eof", f"the agent was still running {timeout:.0f}s after its stdin closed ({self.ended_by})")
            # Orphans only exist once the agent is gone: end it alone (its group stays, to be
            # found below and cleaned up, not blamed: the agent never had its chance to end it).
            tracker.snapshot()
            killed = True
            try:
                os.kill(pid, signals.SIGKILL)
            except ProcessLookupError:
                pass
            code = self.proc.wait(timeout=10)
        # Give the reader a moment to take the last lines the agent wrote before it exited.
        self.client.inbox.join(timeout=5)
        survivors = self.survivors()
        checker.exercised["exit_after_eof"] += 1
        if not killed:
            checker.exercised["no_orphan_processes"] += 1
        if survivors and not killed:
            listing = ", ".join(f"pid {p.pid} ({p.comm}, sid {p.sid})" for p in survivors)
            checker.add("no_orphan_processes", f"{len(survivors)} process(es) outlived the agent: {listing}")
        try:
            os.killpg(pid, signals.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_all(survivors)
        # After EOF a clean exit (0) promises an answer to everything (S13). A signal may stop the
        # agent before it read the last requests: only those it must have read are owed answers.
        complete: bool | str = True if (code == 0 and self.ended_by == "eof" and self.answers_owed_at_eof) else "read"
        if self.owed_at_end is not None:
            complete = self.owed_at_end
        checker.finish(self.records, complete=complete)
        self.close()
        return self._ended(code, killed, pid)

    def _finish_remote(self, timeout: float) -> RunResult:
        """A remote agent's run: the connection ended (a close frame, a DELETE) and the agent's end
        of it awaited, then dropped if it lingers. No process: its exit, its descendants and its
        stderr are not judged (the rows that would are not exercised)."""
        if not self._input_closed:
            self.close_input()
        killed = False
        try:
            code: int | None = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            self.kill()
            code = self.proc.wait(timeout=10)
        self.client.inbox.join(timeout=5)
        complete: bool | str = True if (code == 0 and self.ended_by == "eof" and self.answers_owed_at_eof) else "read"
        if self.owed_at_end is not None:
            complete = self.owed_at_end
        self.checker.finish(self.records, complete=complete)
        self.close()
        return self._ended(code, killed, 0)

    def _ended(self, code: int | None, killed: bool, pid: int) -> RunResult:
        checker = self.checker
        tail = bytes(self.stderr[-2000:]).decode("utf-8", "replace")
        self._result = RunResult(
            exit_code=code,
            violations=list(checker.violations),
            advisories=list(checker.advisories),
            exercised=dict(checker.exercised),
            messages_in=sum(1 for r in self.records if r.direction == "in"),
            messages_out=sum(1 for r in self.records if r.direction == "out"),
            prompts_answered=checker.prompts_answered,
            cancelled_prompts=checker.cancelled_prompts,
            stderr_tail=tail,
            ended_by=self.ended_by,
            killed=killed,
            pid=pid,
        )
        return self._result

    def __enter__(self) -> "CheckedAgent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def sleep(seconds: float) -> None:
    """Cooperative sleep (re-exported so scenarios need not import gevent)."""
    gevent.sleep(seconds)
