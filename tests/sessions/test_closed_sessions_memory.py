"""Memory of closed sessions is returned: closing a session frees everything the
runtime held for it (only its stored record stays, in the store), and an idle agent holding
100,000 sessions exits at EOF at once.

These drive the real `acp-green serve` with pre-encoded requests written in large pipelined
batches and a reader that only counts answers, so the agent, not the client, sets the pace.
"""

from __future__ import annotations

import gc
import json
import sys
import time

import gevent
from gevent import subprocess
from gevent.event import Event
from gevent.os import make_nonblocking, nb_read
import pytest

from acp_green.demo import DemoAgent
from acp_green.mcp.session import SessionMcp
from acp_green.rpc.cancel import CancelToken
from acp_green.sessions import Session
from tests.helpers import wait_until

BATCH = 500
NEW = b'{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}\n'
CLOSE = b'{"jsonrpc":"2.0","id":%d,"method":"session/close","params":{"sessionId":"%s"}}\n'


class PipelinedAgent:
    """`acp-green serve` fed pre-encoded lines; keeps only the answers' results, by id."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_green", "serve", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.results: dict[int, object] = {}
        self.answered = Event()
        self._awaited = -1
        self._ids = 0
        self._reader = gevent.spawn(self._read)
        self.send([b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'])
        self.wait(0)

    def _read(self) -> None:
        fd = self.proc.stdout.fileno()
        make_nonblocking(fd)
        pending = b""
        while True:
            data = nb_read(fd, 1 << 16)
            if not data:
                return
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if line.startswith(b'{"jsonrpc":"2.0","id"'):
                    message = json.loads(line)
                    self.results[message["id"]] = message.get("result", message.get("error"))
            if self._awaited in self.results:
                self.answered.set()

    def next_ids(self, count: int) -> range:
        start = self._ids + 1
        self._ids += count
        return range(start, start + count)

    def send(self, lines: list[bytes]) -> None:
        self.proc.stdin.write(b"".join(lines))
        self.proc.stdin.flush()

    def wait(self, request_id: int, timeout: float = 120) -> object:
        self._awaited = request_id
        wait_until(lambda: request_id in self.results, timeout, f"the answer to request {request_id}", self.answered)
        return self.results[request_id]

    def open_sessions(self, count: int) -> list[str]:
        ids = self.next_ids(count)
        self.send([NEW % i for i in ids])
        self.wait(ids[-1])
        sessions = [self.results.pop(i)["sessionId"] for i in ids]
        return sessions

    def close_sessions(self, sessions: list[str]) -> None:
        ids = self.next_ids(len(sessions))
        self.send([CLOSE % (i, sid.encode()) for i, sid in zip(ids, sessions)])
        self.wait(ids[-1])
        assert all(self.results.pop(i) == {} for i in ids)

    def churn(self, count: int) -> None:
        """Open and close `count` sessions, BATCH at a time."""
        for _ in range(count // BATCH):
            self.close_sessions(self.open_sessions(BATCH))

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

    def live_sessions(self) -> int:
        (request_id,) = self.next_ids(1)
        self.send([b'{"jsonrpc":"2.0","id":%d,"method":"_acp_green/stats","params":{}}\n' % request_id])
        return self.wait(request_id)["liveSessions"]

    def eof(self) -> None:
        self.proc.stdin.close()

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=10)
        self.proc.stdout.close()


# The warm-up fills the allocator's pools and, with a state dir, SQLite's page cache (2 MiB at
# most; 10,000 sessions make a 2.5 MB database), so what follows measures what is kept.
@pytest.mark.parametrize(("store", "warm_up"), [
    ("--ephemeral", 5_000),
    # Through SQLite the agent's RSS settles only after about 30,000 sessions: with 10,000 the two
    # rounds measured 490 to 945 bytes a session here, on this code and the code before it alike,
    # and the same churn in process (no agent) grew by 2.9, 0.7, 0.5 and then 0 MiB a round, with
    # nothing kept on Python's heap. From 30,000 on the rounds measure 0 to 117 bytes a session.
    pytest.param("--state-dir", 30_000, marks=pytest.mark.slow),
])
def test_rss_returns_after_ten_thousand_sessions_are_opened_and_closed(tmp_path, store, warm_up):
    """After a warm-up, 10,000 sessions opened and closed grow the agent's VmRSS by no more
    than 450 bytes each (the smaller of two rounds). With --ephemeral the store keeps every closed session's record in
    memory (about 250 bytes each, by design); the runtime keeps nothing of them."""
    args = [store] if store == "--ephemeral" else [store, str(tmp_path / "state")]
    agent = PipelinedAgent(*args)
    try:
        agent.churn(warm_up)
        # Two rounds, judged by the smaller growth: the allocator and SQLite's cache grow in
        # steps that land in one round or the other (11 to 570 bytes a session, run to run, on
        # the same code), while what is kept per session shows in every round.
        rounds = []
        for _ in range(2):
            before = agent.rss_kib()
            agent.churn(10_000)
            after = agent.rss_kib()
            rounds.append((after - before) * 1024 / 10_000)
            print(f"{store}: VmRSS {before} KiB, then {after} KiB after 10,000 more ({rounds[-1]:.0f} bytes per session)")
        assert agent.live_sessions() == 0
        kept = min(rounds)
        # The memory store keeps each closed session's record (~250 bytes with its key and dict
        # slot); anything the runtime kept of a session (its objects, token, greenlets) is
        # kilobytes. A bound per session, not a share of RSS: 10% of ~26 MiB was below what the
        # 10,000 records themselves take, and passed only when they fitted in freed memory.
        assert kept <= 450, rounds
    finally:
        agent.end()


@pytest.mark.slow  # creating 100,000 sessions takes 25-30 s on a loaded 2-core machine
def test_an_idle_agent_holding_100000_sessions_exits_at_eof_within_the_grace():
    """S13: 100,000 open, idle sessions, then EOF: the agent exits well within its
    shutdown grace (dropping a session that started nothing costs no greenlet and no join)."""
    # A plain agent (no commands, modes or options to announce per session) keeps the 100,000
    # session/new cheap; what is measured, the exit, does not depend on the agent.
    agent = PipelinedAgent("--agent", "tests.agents:SleepsAfterCancelAgent", "--ephemeral", "--shutdown-grace", "5")
    try:
        for _ in range(100_000 // 5_000):
            ids = agent.next_ids(5_000)
            agent.send([NEW % i for i in ids])
            agent.wait(ids[-1], timeout=300)
            agent.results.clear()
        assert agent.live_sessions() == 100_000
        started = time.monotonic()
        agent.eof()
        assert agent.proc.wait(timeout=60) == 0
        took = time.monotonic() - started
        print(f"exit after EOF with 100,000 idle sessions: {took:.2f}s")
        assert took < 5, took  # the grace: what must not be exceeded, not a speed target
    finally:
        agent.end()


def test_closing_a_session_leaves_no_runtime_object_behind(inprocess):
    """After session/new + session/close, no Session, CancelToken or SessionMcp of
    it stays reachable, and the protocol's per-session tables are empty (a prompted session
    and one that declared an MCP server included)."""
    harness = inprocess(DemoAgent())
    client = harness.client
    client.initialize()
    server = harness.server
    sids = [client.new_session() for _ in range(20)]
    assert client.prompt(sids[0], "hello").result() == {"stopReason": "end_turn"}
    declared = client.call("session/new", {"cwd": "/tmp", "mcpServers": [{"name": "none", "command": "/nonexistent/mcp", "args": [], "env": []}]})
    sids.append(declared["sessionId"])
    for sid in sids:
        client.call("session/close", {"sessionId": sid})
    client.wait_for(lambda: not server.protocol.session_mcp, what="MCP closers done")

    def leftovers() -> list[object]:
        gc.collect()
        return [o for o in gc.get_objects() if isinstance(o, (Session, SessionMcp)) or type(o) is CancelToken]

    # The closers' greenlets end just after they deregister: wait for them (bounded), not a fixed time.
    wait_until(lambda: not leftovers(), timeout=10, what="closed sessions to be freed")
    assert len(server.sessions) == 0 and server.protocol.prompts == {}
    assert leftovers() == []
    assert [r.session_id for r in server.store.list_sessions(limit=100)].count(sids[0]) == 1  # still stored
