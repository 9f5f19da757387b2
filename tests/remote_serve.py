"""`acp-green serve --listen` as a real process for the remote interop tests: on 127.0.0.1, a port
the kernel picks (read from the line it writes on stderr), its own state dir; stopped at teardown
with SIGTERM, which must end it with exit 0 and leave no process of its group behind (S13).

The server is started with gevent's subprocess (so its exit status is read whatever reaps it) and
its stderr is drained by an OS thread: the Python SDK's clients run in asyncio.run(), which holds
the gevent hub, and the server's stderr must be read meanwhile too.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gevent import subprocess

from tests.helpers import group_members, wait_until

#: The line the server writes once it listens (PORT is the real one when 0 was asked).
SERVING = re.compile(r"serving ACP at (https?://[0-9.]+:(\d+)/acp)")
BOUND = 30.0  # the one generous bound on every wait here


class RemoteServer:
    """One `acp-green serve --listen 127.0.0.1:0 [--state-dir STATE] ARGS...` process (without a
    state dir, ARGS say where state goes: `--ephemeral` or their own `--state-dir`)."""

    def __init__(self, state_dir: Path | None, *args: str, env: dict[str, str] | None = None) -> None:
        where = ["--state-dir", str(state_dir)] if state_dir is not None else []
        self.command = [sys.executable, "-m", "acp_green", "serve", "--listen", "127.0.0.1:0", *where, *args]
        self.url: str | None = None
        self._stderr: list[bytes] = []
        self._lock = threading.Lock()
        read_fd, write_fd = os.pipe()
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        full_env.pop("ACP_GREEN_TOKEN", None)  # only --token (or the test's env) sets one
        full_env.update(env or {})
        # stdin stays an open pipe: whether a listening server reads it is none of these tests' business.
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=write_fd,
                                     env=full_env, start_new_session=True)
        os.close(write_fd)
        self._reader = threading.Thread(target=self._drain, args=(read_fd,), name="serve-stderr", daemon=True)
        self._reader.start()
        try:
            wait_until(lambda: self._found_url() or self.proc.poll() is not None, BOUND, "the 'serving ACP at' line")
        except AssertionError:
            self.kill()
            raise AssertionError(f"no 'serving ACP at' line from {self.command}:\n{self.stderr}") from None
        if self.url is None:
            raise AssertionError(f"{self.command} exited {self.proc.returncode} before listening:\n{self.stderr}")

    @property
    def ws_url(self) -> str:
        """The WebSocket address (wss:// when the server speaks TLS)."""
        assert self.url is not None
        return "ws" + self.url[len("http"):]

    @property
    def port(self) -> int:
        match = SERVING.search(self.stderr)
        assert match is not None
        return int(match.group(2))

    @property
    def stderr(self) -> str:
        with self._lock:
            return b"".join(self._stderr).decode("utf-8", "replace")

    def _drain(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                with self._lock:
                    self._stderr.append(chunk)

    def _found_url(self) -> bool:
        match = SERVING.search(self.stderr)
        if match:
            self.url = match.group(1)
        return match is not None

    def stop(self) -> list[str]:
        """SIGTERM; the problems found: an exit other than 0, a process of its group left behind."""
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.kill()
            return [f"{self.command} still ran {BOUND:g} s after SIGTERM"]
        if code != 0:
            problems.append(f"{self.command} exited {code} after SIGTERM (expected 0)")
        try:
            wait_until(lambda: not group_members(self.proc.pid), BOUND, "the server's process group to be gone")
        except AssertionError:
            problems.append(f"processes {group_members(self.proc.pid)} of the server outlived it (S13)")
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self._reader.join(BOUND)
        return problems

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=BOUND)


@pytest.fixture
def remote_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RemoteServer]]:
    """Start `acp-green serve --listen 127.0.0.1:0` with a tmp `--state-dir` (extra ARGS after it);
    every server started is stopped at teardown with SIGTERM, which must end it with exit 0 (S13).
    Its stderr is printed at teardown, so a failing test shows it."""
    started: list[RemoteServer] = []

    def start(*args: str, env: dict[str, str] | None = None) -> RemoteServer:
        server = RemoteServer(tmp_path_factory.mktemp("remote-state"), *args, env=env)
        started.append(server)
        return server

    yield start
    problems = []
    for server in started:
        problems += server.stop()
        print(f"--- stderr of {' '.join(server.command)}\n{server.stderr}")
    assert not problems, problems
