"""`acp-green record`: a transparent stdio proxy between an editor and any agent, writing a trace.

Every byte is forwarded unchanged as soon as it is read, before it is traced: the trace is
written by the thread that forwarded the chunk, after forwarding it, so a slow or failing trace
file never holds a byte back. One thread per stream (editor → agent, agent → editor, the agent's
stderr), all with blocking reads and writes: back-pressure passes through as it would without us
(an editor that stops reading stops the agent's writes, as a full pipe would).

The agent runs in a process group of its own, so a signal the terminal sends to the foreground
group reaches it once (forwarded by us), not twice.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ...tracing import AGENT, CLIENT, StreamTrace, TraceWriter

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
#: Forwarded to the agent: every signal an editor or a terminal sends to end, hang up or poke a process.
FORWARDED = tuple(getattr(signal, name) for name in (
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH", "SIGCONT",
) if hasattr(signal, name))
#: How long the agent's output may take to drain once it has exited (a child it left may hold the pipe).
DRAIN_TIMEOUT = 5.0


def trace_file_name(pid: int | None = None, now: datetime.datetime | None = None) -> str:
    """The default trace file name, unique per launch: acp-trace-20261201T190512.345Z-4242.jsonl."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    return f"acp-trace-{stamp}-{os.getpid() if pid is None else pid}.jsonl"


@dataclass(frozen=True)
class RecordOptions:
    """What `acp-green record` was asked."""

    command: Sequence[str]
    out: str | None = None  # the trace file
    out_dir: str | None = None  # else a fresh file per launch in this directory (default: the current one)

    def trace_path(self) -> str:
        if self.out is not None:
            return self.out
        if self.out_dir is not None:
            try:
                os.makedirs(self.out_dir, exist_ok=True)
            except OSError:
                pass  # the trace file's own open fails next, and says so
        return os.path.join(self.out_dir or os.getcwd(), trace_file_name())


class Recorder:
    """One recording: the agent, the three pumps and the trace."""

    def __init__(self, options: RecordOptions, launch: Sequence[str] | None = None, env: dict[str, str] | None = None,
                 shown: Sequence[str] | None = None) -> None:
        self.options = options
        # What runs (the command, or for an agent at a URL the link between our pipes and it) and
        # what the trace names (the command as given, a URL's secrets hidden).
        self.launch = list(options.command if launch is None else launch)
        self.env = env
        self.shown = list(options.command if shown is None else shown)
        self.trace = TraceWriter(options.trace_path(), "recorder")
        self.agent: subprocess.Popen[bytes] | None = None
        self._reaped = False

    def run(self) -> int:
        """Record until the agent exits; its exit status (128+N when signal N ended it)."""
        # Our own pipes (not inheritable), not Popen's file objects: each pump closes its
        # descriptors itself, once.
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            agent = self.agent = subprocess.Popen(self.launch, stdin=stdin_r, stdout=stdout_w,
                                                  stderr=stderr_w, process_group=0, env=self.env)
        except OSError as exc:
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w, stderr_r, stderr_w):
                os.close(fd)
            log.error("cannot start %s: %s", self.launch[0], exc.strerror or exc)
            self.trace.start(self.shown, None)
            self.trace.note("error", f"cannot start the agent: {exc}")
            self.trace.finish(None, None)
            return 127 if isinstance(exc, FileNotFoundError) else 126
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
        self.trace.start(self.shown, agent.pid)
        previous = {signum: signal.signal(signum, self._forward) for signum in FORWARDED}  # ok: the recorder runs no gevent hub (plain threads)
        to_agent = _pump(0, stdin_w, StreamTrace(self.trace, CLIENT), "client → agent", self.trace)
        to_client = _pump(stdout_r, 1, StreamTrace(self.trace, AGENT), "agent → client", self.trace)
        stderr = _pump(stderr_r, 2, StreamTrace(self.trace, AGENT, stderr=True), "agent stderr", self.trace,
                       pass_eof=False)  # our stderr stays ours: our own last words go there
        try:
            status = agent.wait()
        finally:
            self._reaped = True
            for signum, handler in previous.items():
                signal.signal(signum, handler)  # ok: restores the handlers above; no gevent hub here
        for pump in (to_client, stderr):
            pump.join(DRAIN_TIMEOUT)
        to_agent.stop_tracing()  # its thread may sit in a read of our stdin for good
        if status < 0:
            self.trace.finish(None, _signal_name(-status))
            return 128 - status
        self.trace.finish(status, None)
        return status

    def _forward(self, signum: int, _frame: object) -> None:
        # Runs in the main thread, which only waits for the agent while this handler is
        # installed: never inside a trace write, so the note below cannot wait on its own lock.
        agent = self.agent
        if agent is not None and not self._reaped:
            try:
                os.kill(agent.pid, signum)
            except OSError:
                return
            self.trace.note("info", f"forwarded {_signal_name(signum)} to the agent")


class _Pump:
    """Copies one descriptor to another chunk by chunk, tracing each chunk after forwarding it."""

    def __init__(self, source: int, target: int, stream: StreamTrace, name: str, trace: TraceWriter,
                 pass_eof: bool) -> None:
        self.source, self.target, self.stream, self.trace = source, target, stream, trace
        self.pass_eof = pass_eof
        self._tracing = True
        self.thread = threading.Thread(target=self._run, name=f"record {name}", daemon=True)
        self.name = name

    def _run(self) -> None:
        target_open = True
        while True:
            try:
                chunk = os.read(self.source, _CHUNK)
            except OSError as exc:
                self.trace.note("error", f"{self.name}: read failed: {exc}")
                break
            if not chunk:
                break
            if target_open:
                try:
                    _write_all(self.target, chunk)
                except OSError as exc:
                    # The reader is gone: close our end of the source too, so the writer learns it
                    # as it would have without us (EPIPE), and stop.
                    target_open = False
                    self.trace.note("warn", f"{self.name}: {exc.strerror or exc}; forwarding stopped")
                    break
            if self._tracing:
                self.stream.feed(chunk)
        if self._tracing:
            self.stream.end()
        if self.pass_eof:
            _close_for_reader(self.target)
        if self.source != 0:
            os.close(self.source)

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.trace.note("warn", f"{self.name}: still open {timeout:g} s after the agent exited (a child of it holds it?)")
            self.stop_tracing()

    def stop_tracing(self) -> None:
        self._tracing = False


def _pump(source: int, target: int, stream: StreamTrace, name: str, trace: TraceWriter, *,
          pass_eof: bool = True) -> _Pump:
    pump = _Pump(source, target, stream, name, trace, pass_eof)
    pump.thread.start()
    return pump


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _close_for_reader(fd: int) -> None:
    """Pass EOF on: the agent's stdin is closed; our stdout (fd 1) is pointed at /dev/null, so
    the editor sees the end while the fd number stays taken."""
    try:
        if fd == 1:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        else:
            os.close(fd)
    except OSError:
        pass


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def main(options: RecordOptions) -> int:
    """Run `acp-green record`; the exit status to leave with.

    An agent given as a URL (`record URL [--header 'NAME: VALUE'] [--token T]`) is reached by the
    rig's link (tools/rig/remote_link.py) run as the recorded process: the trace holds the lines
    as they pass between the editor and the link, and the link's notes as its stderr."""
    logging.basicConfig(level=logging.WARNING, format="acp-green record: %(message)s")
    if not options.command or "://" not in options.command[0]:
        return Recorder(options).run()
    from ..rig.remote_link import bridge_command, remote_target, shown_command  # imports gevent: only for a URL

    try:
        target = remote_target(options.command)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    if target is None:
        return Recorder(options).run()
    launch, env = bridge_command(target)
    return Recorder(options, launch, env, shown_command(options.command)).run()
