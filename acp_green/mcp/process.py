"""A stdio child process speaking newline-delimited JSON-RPC (an MCP server), run the gevent way.

`gevent.subprocess` only; explicit stdin/stdout/stderr (an inheriting
child would clear O_NONBLOCK on our descriptions or read our protocol bytes); stderr always
drained, never an unread pipe (the SDK's servers log every request there and block at ~64 KiB);
its own session and process group (`start_new_session=True`, never `preexec_fn`); one writer
greenlet per child stdin (a shared FileObject writer is not reentrant). Its stdout is framed by
`transport.LineReader`, the framer of the agent's own stdin: bounded memory, an over-long line
skipped. The reader yields between lines (`fairness.FairShare`, the budget streams share per
hub iteration), not only when the pipe is empty: a child that writes without pause would
otherwise keep the hub from polling, and the agent's own stdin with it.

What waits for the child's stdin is counted in bytes (`queued_bytes`); a link asks `has_room`
before it queues, so a child that stops reading cannot grow the agent's memory past
`max_stdin_bytes` (one message is always accepted when nothing is queued).
"""

from __future__ import annotations

import logging
import os
import signal
from collections import deque
from collections.abc import Callable, Sequence

import gevent
from gevent import subprocess
from gevent.event import Event
from gevent.greenlet import Greenlet
from gevent.lock import Semaphore
from gevent.queue import Queue

from ..rpc.fairness import share
from ..redact import redact_argv
from ..rpc.transport import LineReader, read_chunks
from . import escapees

log = logging.getLogger(__name__)

#: Longest line accepted from a child by default (newline excluded); a longer one is skipped as garbage.
MAX_LINE_BYTES = 64 << 20
#: A line at least this long is handed to the link as a bytearray the decoder empties once it
#: has its text, so the line's bytes do not stay alive while its value is built.
LONG_LINE = 1 << 20
#: Most bytes queued for a child's stdin by default (see `has_room`).
MAX_STDIN_BYTES = 16 << 20
#: How much of the child's stderr is kept for error messages.
STDERR_TAIL = 4096
_STOP = object()
#: Children are started one at a time, process-wide. A fork blocks the hub for a few ms; a
#: session declaring dozens of servers would otherwise fork them all back to back in one hub
#: turn (their starter greenlets run as one batch of callbacks) and nothing is read or written
#: meanwhile. Held until the child has exec'd (gevent's Popen waits for that cooperatively), so
#: the loop polls I/O between two forks.
_LAUNCHING = Semaphore()


class StdioProcess:
    """One child: a FIFO writer to its stdin, a line reader on its stdout, a drain on its stderr.

    Bytes only: each non-blank line the child writes goes to `on_line` as it is (decoding is the
    link's, `peer.McpPeer.receive`); `send` queues bytes already encoded."""

    def __init__(
        self,
        argv: Sequence[str],
        on_line: Callable[[bytes | bytearray], None],
        *,
        on_exit: Callable[["StdioProcess"], None] | None = None,
        on_too_long: Callable[[str], None] | None = None,
        name: str = "mcp",
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_stdin_bytes: int = MAX_STDIN_BYTES,
    ) -> None:
        """Start the child; raises OSError (e.g. FileNotFoundError) if it cannot be started."""
        self.name = name
        self.max_line_bytes = max_line_bytes
        self.argv = list(argv)
        self._on_line = on_line
        self._on_exit = on_exit
        self._on_too_long = on_too_long
        self.max_stdin_bytes = max_stdin_bytes
        self.queued_bytes = 0  # queued for stdin and not yet written
        self._stderr_tail: deque[bytes] = deque()
        self._stderr_size = 0
        self.exited = Event()  # set once stdout reached EOF and the process was reaped
        self.returncode: int | None = None
        self._outgoing: Queue = Queue()
        self._closing = False
        self.mark = escapees.new_mark()
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env[escapees.MARK_VARIABLE] = self.mark  # inherited by every descendant: see escapees.py
        with _LAUNCHING:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        self.pid: int = self.proc.pid
        # gevent.subprocess already wraps the pipes in cooperative file objects.
        self._stdin = self.proc.stdin
        self._stdout = self.proc.stdout
        self._writer = self._spawn(self._write_loop, "writer")
        self._reader = self._spawn(self._read_loop, "reader")
        self._drain = self._spawn(self._drain_stderr, "stderr")
        log.info("started MCP server %s (pid %d): %s", name, self.pid, " ".join(redact_argv(self.argv)))

    def _spawn(self, target: Callable[[], None], role: str) -> Greenlet:
        greenlet = Greenlet(target)
        greenlet.name = f"mcp-{self.name}-{role}"
        greenlet.start()
        return greenlet

    # -- output to the child -------------------------------------------------------------------
    def send(self, data: bytes) -> bool:
        """Queue one encoded message (with its newline) for the child's stdin, in call order;
        False if the child is gone."""
        if self._closing or self.exited.is_set():
            return False
        self.queued_bytes += len(data)
        self._outgoing.put(data)
        return True

    def has_room(self, size: int) -> bool:
        """Whether `size` more bytes may be queued for stdin: within `max_stdin_bytes`, or nothing queued."""
        return self.queued_bytes == 0 or self.queued_bytes + size <= self.max_stdin_bytes

    def _write_loop(self) -> None:
        try:
            while True:
                data = self._outgoing.get()
                if data is _STOP:
                    break
                self._stdin.write(data)
                self._stdin.flush()
                self.queued_bytes -= len(data)
        except OSError as exc:  # broken pipe: the child went away; the reader sees EOF
            log.info("MCP server %s stdin closed: %s", self.name, exc)
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    # -- input from the child ------------------------------------------------------------------
    def _read_loop(self) -> None:
        # Reads the descriptor itself: nothing else may read self._stdout (its buffer would eat bytes).
        reader = LineReader(self._stdout.fileno(), self.max_line_bytes)
        fair = share()
        try:
            for line in reader.lines():
                if line.too_long:
                    self._too_long()
                elif len(line.data) < LONG_LINE:
                    self._deliver(line.data)
                else:  # handed over as a bytearray the decoder empties: see wire.decode
                    data, line.data = bytearray(line.data), b""
                    self._deliver(data)
                    del data
                fair.yield_if_due()
        except OSError as exc:
            log.info("reading MCP server %s failed: %s", self.name, exc)
        finally:
            reader.close()  # before _reap closes the descriptor under the reader's io watcher
            self._reap()

    def _too_long(self) -> None:
        reason = f"a line over {self.max_line_bytes} bytes"
        if self._on_too_long is None:
            log.warning("MCP server %s wrote %s; skipped", self.name, reason)
            return
        try:
            self._on_too_long(reason)  # the link counts it with the rest of the junk, its logging bounded
        except Exception:
            log.exception("handling an over-long line from MCP server %s failed", self.name)

    def _deliver(self, line: bytes | bytearray) -> None:
        if not line or line.isspace():  # never strip(): it would copy a long bytearray
            return
        try:
            self._on_line(line)
        except Exception:
            log.exception("handling a message from MCP server %s failed", self.name)

    def _drain_stderr(self) -> None:
        for chunk in read_chunks(self.proc.stderr.fileno()):
            self._stderr_tail.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size - len(self._stderr_tail[0]) >= STDERR_TAIL:
                self._stderr_size -= len(self._stderr_tail.popleft())

    def stderr_tail(self) -> str:
        """The last few KiB the child wrote to stderr, as text."""
        return b"".join(self._stderr_tail)[-STDERR_TAIL:].decode("utf-8", "replace")

    def _reap(self) -> None:
        """stdout is closed: the child is exiting. Wait for it, kill leftovers of its group."""
        self._closing = True
        self._outgoing.put(_STOP)
        try:
            self.returncode = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self.returncode = self.proc.wait()
        self._signal_group(signal.SIGKILL)  # grandchildren that kept running
        escapees.kill_marked(self.mark)  # and those that left the group (setsid)
        for stream in (self.proc.stdout,):
            try:
                stream.close()
            except OSError:
                pass
        log.info("MCP server %s (pid %d) exited with %s", self.name, self.pid, self.returncode)
        self.exited.set()
        if self._on_exit is not None:
            try:
                self._on_exit(self)
            except Exception:
                log.exception("exit handler of MCP server %s failed", self.name)

    def describe_exit(self) -> str:
        """A one-line account of how the child ended, with the end of its stderr."""
        tail = " ".join(self.stderr_tail().split())[-300:]
        text = f"MCP server {self.name!r} exited with code {self.returncode}"
        return f"{text}: {tail}" if tail else text

    # -- stopping ------------------------------------------------------------------------------
    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _gone_within(self, seconds: float) -> bool:
        """Whether the child exited (or its stdout ended) within `seconds`."""
        gevent.wait([self.exited, self.proc.result], timeout=seconds, count=1)
        return self.exited.is_set() or self.proc.poll() is not None

    def kill(self) -> None:
        """Stop the child at once, without waiting (a misbehaving server gets no grace): the
        reader then sees EOF and reaps it."""
        if not self._closing:
            self._closing = True
            self._outgoing.put(_STOP)
        self._signal_group(signal.SIGKILL)

    def close(self, grace: float = 1.0) -> None:
        """Stop the child and reap it: EOF first (MCP servers exit on it), then SIGTERM, then SIGKILL.

        Each step waits for the child itself, not for EOF on its stdout: a descendant that left
        its group (setsid) may hold that open. Once the child is gone such descendants are killed
        by their mark, and a pipe still held after that is given up on: our ends are closed and
        the child reaped here, so closing takes at most about 2 x grace + 1 s."""
        if not self._closing:
            self._closing = True
            self._outgoing.put(_STOP)
        if not self._gone_within(grace):
            self._signal_group(signal.SIGTERM)
            if not self._gone_within(grace):
                self._signal_group(signal.SIGKILL)
        if not self.exited.is_set():
            escapees.kill_marked(self.mark)  # whatever still holds its stdout left the group
        if not self.exited.wait(1.0):  # the reader is stuck: reap here
            self._signal_group(signal.SIGKILL)
            self._reader.kill(block=False)
            try:
                self.returncode = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                log.warning("MCP server %s (pid %d) could not be reaped", self.name, self.pid)
            self.exited.set()
        self._drain.join(timeout=1)
        if not self._drain.dead:
            self._drain.kill(block=False)
        try:
            self.proc.stderr.close()
        except OSError:
            pass
