"""A stdio child process speaking newline-delimited JSON-RPC (an MCP server), run the gevent way.

`gevent.subprocess` only; explicit stdin/stdout/stderr (an inheriting
child would clear O_NONBLOCK on our descriptions or read our protocol bytes); stderr always
drained, never an unread pipe (the SDK's servers log every request there and block at ~64 KiB);
its own session and process group (`start_new_session=True`, never `preexec_fn`); one writer
greenlet per child stdin (a shared FileObject writer is not reentrant). Its stdout is framed by
`transport.LineReader`, the framer of the agent's own stdin: bounded memory, an over-long line
skipped.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import deque
from collections.abc import Callable, Sequence

from gevent import subprocess
from gevent.event import Event
from gevent.greenlet import Greenlet
from gevent.lock import Semaphore
from gevent.queue import Queue

from ..redact import redact_argv
from ..transport import LineReader, read_chunks

log = logging.getLogger(__name__)

#: Longest line accepted from a child by default (newline excluded); a longer one is skipped as garbage.
MAX_LINE_BYTES = 64 << 20
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
        on_line: Callable[[bytes], None],
        *,
        on_exit: Callable[["StdioProcess"], None] | None = None,
        name: str = "mcp",
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        """Start the child; raises OSError (e.g. FileNotFoundError) if it cannot be started."""
        self.name = name
        self.max_line_bytes = max_line_bytes
        self.argv = list(argv)
        self._on_line = on_line
        self._on_exit = on_exit
        self._stderr_tail: deque[bytes] = deque()
        self._stderr_size = 0
        self.exited = Event()  # set once stdout reached EOF and the process was reaped
        self.returncode: int | None = None
        self._outgoing: Queue = Queue()
        self._closing = False
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update(env)
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
        self._outgoing.put(data)
        return True

    def _write_loop(self) -> None:
        try:
            while True:
                data = self._outgoing.get()
                if data is _STOP:
                    break
                self._stdin.write(data)
                self._stdin.flush()
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
        try:
            for line in reader.lines():
                if line.too_long:
                    log.warning("MCP server %s wrote a line over %d bytes; skipped", self.name, self.max_line_bytes)
                    continue
                self._deliver(line.data)
        except OSError as exc:
            log.info("reading MCP server %s failed: %s", self.name, exc)
        finally:
            reader.close()  # before _reap closes the descriptor under the reader's io watcher
            self._reap()

    def _deliver(self, line: bytes) -> None:
        if not line.strip():
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

    def close(self, grace: float = 1.0) -> None:
        """Stop the child and reap it: EOF first (MCP servers exit on it), then SIGTERM, then SIGKILL."""
        if not self._closing:
            self._closing = True
            self._outgoing.put(_STOP)
        if not self.exited.wait(grace):
            self._signal_group(signal.SIGTERM)
            if not self.exited.wait(grace):
                self._signal_group(signal.SIGKILL)
                self.exited.wait(5)
        if not self.exited.is_set():  # the reader is stuck: reap here
            self._signal_group(signal.SIGKILL)
            self._reader.kill(block=False)
            self.returncode = self.proc.wait()
            self.exited.set()
        self._drain.join(timeout=1)
        if not self._drain.dead:
            self._drain.kill(block=False)
        try:
            self.proc.stderr.close()
        except OSError:
            pass
