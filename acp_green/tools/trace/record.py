"""`acp-green record`: a transparent stdio proxy between an editor and any agent, writing a trace.

Every byte is forwarded unchanged, chunk by chunk as it is read, and each line is traced in the
order it passed: a line is written to the trace before its newline is forwarded, so a request
is in the trace before the agent could have read all of it, let alone answered it (the bytes
before a chunk's first newline go on at once, the rest once the lines it completes are traced).
The trace is written by the thread that forwards the chunk; a trace file that fails is dropped
(said once), never waited for again. One thread per stream (editor → agent, agent → editor, the
agent's stderr), all with blocking reads and writes: back-pressure passes through as it would
without us (an editor that stops reading stops the agent's writes, as a full pipe would). A
line of any length is traced in bounded memory (record_lines.py: a long one is spooled to an
unlinked file beside the trace as it passes).

The agent runs in a process group of its own, so a signal the terminal sends to the foreground
group reaches it once (forwarded by us), not twice. Python runs a signal's handler in the main
thread, so the main thread waits for the agent where every signal wakes it (select on the
signals' wakeup descriptor and a pidfd of the agent), never in a waitpid a signal taken by
another thread would not interrupt. The handler only forwards the signal and queues its note: a
handler may run inside another one (a second signal), so it must never wait on a lock the first
may hold; a thread of its own writes the notes.
"""

from __future__ import annotations

import datetime
import logging
import os
import queue
import select
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ...tracing import AGENT, CLIENT
from .record_lines import LineTracer, RecordWriter

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
#: Forwarded to the agent: every signal an editor or a terminal sends to end, hang up or poke a process.
FORWARDED = tuple(getattr(signal, name) for name in (
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH", "SIGCONT",
) if hasattr(signal, name))
#: How long the agent's output may take to reach its end once it has exited (a child it left may hold the pipe).
DRAIN_TIMEOUT = 5.0
#: Without pidfds, how often the recorder looks whether its agent has exited.
POLL_EXIT = 0.1
#: How long the last lines may then take to be written to the trace (a long line is streamed from its spool).
TRACE_TIMEOUT = 300.0


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
        path = options.trace_path()
        self.trace = RecordWriter(path, "recorder")
        self.directory = os.path.dirname(os.path.abspath(path))  # where a long line is spooled
        self.agent: subprocess.Popen[bytes] | None = None
        self._reaped = False
        # Notes of the signals forwarded: queued by the handler (SimpleQueue.put is reentrant), written by a thread.
        self._notes: queue.SimpleQueue[str | None] = queue.SimpleQueue()

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
        notes = threading.Thread(target=self._write_notes, name="record notes", daemon=True)
        notes.start()
        previous = {signum: signal.signal(signum, self._forward) for signum in FORWARDED}  # ok: the recorder runs no gevent hub (plain threads)
        to_agent = _pump(0, stdin_w, self._lines(CLIENT), "client → agent", self.trace)
        to_client = _pump(stdout_r, 1, self._lines(AGENT), "agent → client", self.trace)
        stderr = _pump(stderr_r, 2, self._lines(AGENT, stderr=True), "agent stderr", self.trace,
                       pass_eof=False)  # our stderr stays ours: our own last words go there
        try:
            status = _wait_woken_by_signals(agent)
        finally:
            self._reaped = True
            for signum, handler in previous.items():
                signal.signal(signum, handler)  # ok: restores the handlers above; no gevent hub here
            self._notes.put(None)
        notes.join()
        for pump in (to_client, stderr):
            pump.join(DRAIN_TIMEOUT)
        to_agent.stop_tracing()  # its thread may sit in a read of our stdin for good
        if status < 0:
            self.trace.finish(None, _signal_name(-status))
            return 128 - status
        self.trace.finish(status, None)
        return status

    def _lines(self, sender: str, *, stderr: bool = False) -> LineTracer:
        return LineTracer(self.trace, sender, stderr=stderr, directory=self.directory)

    def _forward(self, signum: int, _frame: object) -> None:
        # Runs in the main thread between two bytecodes of anything it runs, another run of this
        # handler included: so it takes no lock (the trace's may be held by the run it
        # interrupted, which would then never resume); its note is queued for _write_notes.
        agent = self.agent
        if agent is not None and not self._reaped and agent.returncode is None:
            try:
                os.kill(agent.pid, signum)
            except OSError:
                return
            self._notes.put(f"forwarded {_signal_name(signum)} to the agent")

    def _write_notes(self) -> None:
        while (note := self._notes.get()) is not None:
            self.trace.note("info", note)


class _Pump:
    """Copies one descriptor to another chunk by chunk; each line is traced before its newline is forwarded."""

    def __init__(self, source: int, target: int, lines: LineTracer, name: str, trace: RecordWriter,
                 pass_eof: bool) -> None:
        self.source, self.target, self.lines, self.trace = source, target, lines, trace
        self.pass_eof = pass_eof
        self._tracing = True
        self.ended = threading.Event()  # the source reached its end (or failed): only tracing may be left to do
        self.thread = threading.Thread(target=self._run, name=f"record {name}", daemon=True)
        self.name = name

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self.source, _CHUNK)
            except OSError as exc:
                self.trace.note("error", f"{self.name}: read failed: {exc}")
                break
            if not chunk:
                break
            try:
                self._pass(chunk)
            except OSError as exc:
                # The reader is gone: close our end of the source too, so the writer learns it
                # as it would have without us (EPIPE), and stop.
                self.trace.note("warn", f"{self.name}: {exc.strerror or exc}; forwarding stopped")
                break
        self.ended.set()
        if self._tracing:
            self.lines.end()
        if self.pass_eof:
            _close_for_reader(self.target)
        if self.source != 0:
            os.close(self.source)

    def _pass(self, chunk: bytes) -> None:
        """Forward one chunk, tracing the lines it completes before their newlines go on."""
        first = chunk.find(b"\n") if self._tracing else -1
        if first < 0:
            _write_all(self.target, chunk)
            if self._tracing:
                self.lines.feed(chunk)
            return
        view = memoryview(chunk)
        _write_all(self.target, view[:first])  # the end of a line being passed: it goes on at once
        self.lines.feed(chunk)
        _write_all(self.target, view[first:])

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` for the source's end, then for the last lines to be traced."""
        if not self.ended.wait(timeout):
            self.trace.note("warn", f"{self.name}: still open {timeout:g} s after the agent exited (a child of it holds it?)")
            self.stop_tracing()
            return
        self.thread.join(TRACE_TIMEOUT)
        if self.thread.is_alive():
            self.trace.note("warn", f"{self.name}: its last lines were not traced within {TRACE_TIMEOUT:g} s")
            self.stop_tracing()

    def stop_tracing(self) -> None:
        self._tracing = False


def _pump(source: int, target: int, lines: LineTracer, name: str, trace: RecordWriter, *,
          pass_eof: bool = True) -> _Pump:
    pump = _Pump(source, target, lines, name, trace, pass_eof)
    pump.thread.start()
    return pump


def _wait_woken_by_signals(agent: subprocess.Popen[bytes]) -> int:
    """The agent's exit status, waited for in the main thread so that every signal is handled at once.

    A plain waitpid would not be: Python runs a handler only when the main thread runs, and a
    signal the kernel gives to another of our threads (all can take it), or one that arrives
    between Python's check of the signals and its next waitpid, leaves the main thread blocked
    there until the agent exits, the signal not forwarded (the agent never told to exit). So the
    main thread waits in select on the signals' wakeup descriptor, which every signal writes to,
    and on a pidfd of the agent, which becomes readable when it exits (without pidfds, a poll
    every POLL_EXIT seconds)."""
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    try:
        pidfd: int | None = os.pidfd_open(agent.pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while (status := agent.poll()) is None:
            select.select([wake_r] if pidfd is None else [wake_r, pidfd], [], [], POLL_EXIT if pidfd is None else None)
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        return status
    finally:
        signal.set_wakeup_fd(previous)
        for fd in (wake_r, wake_w) if pidfd is None else (wake_r, wake_w, pidfd):
            os.close(fd)


def _write_all(fd: int, data: bytes | memoryview) -> None:
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
