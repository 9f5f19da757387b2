"""How long control answers wait on the store: a long delete, and a write lock held elsewhere.

Launches `acp-green serve` on a fresh state directory holding one session of ROWS x 1,000
stored updates, then (A) sends session/delete of that session, session/list and a set_mode of
another session (control that needs no disk) in one write, and (B) holds the database's write
lock from this process for LOCK_S seconds while sending session/list and set_mode. Prints each
answer's latency from the write.

    ROWS=2000 LOCK_S=15 .venv/bin/python scripts/store_control_latency.py /tmp/latency

Measured on the 2-core development box (docs/RELIABILITY.md): before the store's fault work,
(A) 2.46 s for list and set_mode after deleting 2,000,000 updates and (B) 15.13 s, the whole
lock; after it, (A) 0.031 s and (B) 0.154 s.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from typing import Any

import gevent

from acp_green.tools.rig.client import AgentProcess
from acp_green.store import statedb
from acp_green.store.session_record import SessionRecord

ROWS = int(os.environ.get("ROWS", "2000"))
LOCK_S = float(os.environ.get("LOCK_S", "15"))


def huge_session(state: str) -> int:
    """A session "huge" of ROWS pieces of 1,000 small updates; how many updates."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    conn = statedb.connect(statedb.db_path(state))
    conn.execute("BEGIN")
    statedb.save_session(conn, SessionRecord("huge", "/tmp", updated_at=1.0))
    statedb.begin_turn(conn, "huge", "t", 1.0, [])
    update = b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"' + b"y" * 40 + b'"}}'
    for _ in range(ROWS):
        statedb.append_history(conn, "huge", "t", [update] * 1000)
    conn.execute("COMMIT")
    conn.close()
    return ROWS * 1000


def timed(agent: AgentProcess, messages: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """Send `messages` in one write; each one's answer latency from it."""
    sent = time.monotonic()
    agent.send(*messages)
    latencies = []
    for message in messages:
        pending = agent.pending_for(message)
        pending.response(timeout=120)
        assert pending.answered_at is not None
        latencies.append((message["method"], round(pending.answered_at - sent, 3)))
    return latencies


def main(base: str) -> None:
    shutil.rmtree(base, ignore_errors=True)
    state = os.path.join(base, "state")
    updates = huge_session(state)
    agent = AgentProcess([sys.executable, "-m", "acp_green", "serve", "--state-dir", state])
    agent.initialize()
    other = agent.new_session()
    agent.call("session/list", {})
    burst = [agent.make_request("session/delete", {"sessionId": "huge"}), agent.make_request("session/list", {}),
             agent.make_request("session/set_mode", {"sessionId": other, "modeId": "code"})]
    print(f"A: delete of {updates} updates:", timed(agent, burst), flush=True)
    locker = sqlite3.connect(statedb.db_path(state), timeout=30, isolation_level=None)  # the agent commits briefly
    locker.execute("BEGIN IMMEDIATE")
    agent.call("session/set_mode", {"sessionId": other, "modeId": "ask"})  # a save the lock holds back
    unlock = gevent.spawn_later(LOCK_S, lambda: (locker.execute("ROLLBACK"), locker.close()))
    burst = [agent.make_request("session/list", {}), agent.make_request("session/set_mode", {"sessionId": other, "modeId": "code"})]
    print(f"B: write lock held elsewhere for {LOCK_S:g}s:", timed(agent, burst), flush=True)
    unlock.join()
    agent.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/acp-green-store-latency")
