"""History at scale against the real CLI: a long turn's peak memory, and a long replay during which
other sessions are answered. The figures are printed (`-s`), never asserted as times."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent
import pytest
from gevent import subprocess
from gevent.event import Event

from tests.conftest import serve_command
from tests.helpers import wait_until

UPDATE_HEAD = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'


class LeanClient:
    """An ACP client over a real `acp-green serve` that keeps nothing of the updates it reads
    (a rig client keeps every line: 400,000 of them would fill this test's own memory). It
    counts session/update lines per session and decodes only the other messages."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(serve_command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.updates: dict[str, int] = {}
        self.on_update: Callable[[str, int], None] | None = None
        self.responses: dict[Any, tuple[float, dict[str, Any]]] = {}
        self.updates_before: dict[Any, dict[str, int]] = {}  # per response: the updates read before it
        self._changed = Event()
        self._ids = iter(range(1, 1 << 30))
        self._reader = gevent.spawn(self._read)

    def _read(self) -> None:
        head = len(UPDATE_HEAD)
        for line in self.proc.stdout:
            if line.startswith(UPDATE_HEAD):
                session_id = line[head : line.index(b'"', head)].decode()
                count = self.updates[session_id] = self.updates.get(session_id, 0) + 1
                if self.on_update is not None:
                    self.on_update(session_id, count)
                continue
            message = json.loads(line)
            if "method" not in message:
                self.responses[message["id"]] = (time.monotonic(), message)
                self.updates_before[message["id"]] = dict(self.updates)
                self._changed.set()

    def send(self, method: str, params: Any) -> tuple[int, float]:
        """Write a request; its id and when it was written."""
        request_id = next(self._ids)
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        return request_id, time.monotonic()

    def answer(self, request_id: int, timeout: float = 600) -> tuple[float, dict[str, Any]]:
        """When the response arrived, and the response."""
        wait_until(lambda: request_id in self.responses, timeout, f"the answer to request {request_id}", self._changed)
        return self.responses[request_id]

    def call(self, method: str, params: Any, timeout: float = 600) -> Any:
        _at, message = self.answer(self.send(method, params)[0], timeout)
        assert "result" in message, message
        return message["result"]

    def peak_rss(self) -> int:
        """The agent's peak resident set size so far (VmHWM), in bytes."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for row in status:
                if row.startswith("VmHWM:"):
                    return int(row.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc status")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)


@pytest.fixture
def lean(tmp_path) -> Iterator[Callable[..., LeanClient]]:
    started: list[LeanClient] = []

    def start(*args: str) -> LeanClient:
        client = LeanClient("--state-dir", str(tmp_path / "state"), *args)
        started.append(client)
        client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return client

    yield start
    for client in started:
        client.close()
        assert client.proc.returncode == 0, client.proc.returncode


def new_session(client: LeanClient) -> str:
    return client.call("session/new", {"cwd": "/tmp", "mcpServers": []})["sessionId"]


def streamed(client: LeanClient, session_id: str, chunks: int) -> None:
    result = client.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": f"/stream {chunks}"}]})
    assert result == {"stopReason": "end_turn"}


def test_a_long_turns_memory_does_not_grow_with_its_length(lean):
    """Bounded memory, default tier: after a 20,000-chunk turn, a 150,000-chunk turn
    to a client that reads promptly raises the agent's peak RSS by less than 10 MiB (keeping
    its lines, as a turn once did, would add over 25 MiB)."""
    client = lean()
    sid = new_session(client)
    streamed(client, sid, 20_000)
    before = client.peak_rss()
    streamed(client, sid, 150_000)
    after = client.peak_rss()
    print(f"peak RSS after 20,000 chunks {before / 2**20:.1f} MiB, after 150,000 more {after / 2**20:.1f} MiB")
    assert client.updates[sid] >= 170_000
    assert after - before < 10 << 20, (before, after)


@pytest.mark.slow
def test_peak_rss_of_a_400000_chunk_turn_is_under_100_mib(lean):
    """Bounded memory, slow tier: an agent streaming a 400,000-chunk turn (64-byte
    chunks, stored as it runs) to a client that reads promptly peaks under 100 MiB RSS."""
    client = lean()
    sid = new_session(client)
    started = time.monotonic()
    streamed(client, sid, 400_000)
    took = time.monotonic() - started
    peak = client.peak_rss()
    print(f"400,000-chunk turn: {took:.1f}s, peak RSS {peak / 2**20:.1f} MiB")
    assert client.updates[sid] >= 400_000
    assert peak < 100 << 20, f"peak RSS {peak / 2**20:.1f} MiB"


@pytest.mark.slow
def test_replay_of_a_100000_chunk_session_while_another_session_is_answered_S2(lean):
    """S2 amended, slow tier: after a restart, session/load of a 100,000-chunk session replays it
    while another session's session/set_mode is answered (one sent every 5,000 replayed updates);
    prints the replay time and the longest set_mode answer time."""
    first = lean()
    sid = new_session(first)
    streamed(first, sid, 100_000)
    first.close()
    client = lean()
    other = new_session(client)
    asked: dict[int, float] = {}

    def every_5000(session_id: str, count: int) -> None:
        if session_id == sid and count % 5000 == 0 and count < 100_000:
            request_id, at = client.send("session/set_mode", {"sessionId": other, "modeId": "code"})
            asked[request_id] = at

    client.on_update = every_5000
    load_id, started = client.send("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    loaded_at, loaded = client.answer(load_id)
    assert "result" in loaded, loaded
    replay_time = loaded_at - started
    answers = {request_id: client.answer(request_id) for request_id in asked}
    longest = max(at - asked[request_id] for request_id, (at, _m) in answers.items())
    during = sum(1 for at, _m in answers.values() if at < loaded_at)
    print(f"replay of a 100,000-chunk session: {replay_time:.2f}s; longest set_mode answer for another session "
          f"during it: {longest * 1000:.1f} ms ({len(asked)} asked, {during} answered before the load)")
    # The whole replay, then the session's commands and title (session/load sends them after the
    # replay and before its response), and nothing after the response (S5).
    assert client.updates_before[load_id][sid] == 1 + 100_000 + 2
    assert client.updates[sid] == client.updates_before[load_id][sid]
    assert all(m.get("result") == {} for _at, m in answers.values())
    assert len(asked) == 19 and during >= 1
