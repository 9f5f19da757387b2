"""A prompt's answer leaves only once its turn's end and usage are committed, so a client that has
the answer finds all of it in the store, from any process sharing it, even if this one is killed
right after (S16, and what lets a client move a session to another agent after a crash)."""

from __future__ import annotations

import sqlite3
import time

from acp_green.demo import DemoAgent
from acp_green.store import statedb
from acp_green.store.sqlite import SqliteStore


def slow_commits(statement: str) -> None:
    """The store thread's trace callback: every COMMIT takes 50 ms longer (a slow disk)."""
    if statement.strip().upper() == "COMMIT":
        time.sleep(0.05)


def test_S16_the_answer_of_a_prompt_follows_the_commit_of_its_turn(inprocess, tmp_path):
    path = statedb.db_path(str(tmp_path / "state"))
    harness = inprocess(DemoAgent(), store=SqliteStore(path, trace=slow_commits))
    client = harness.client
    client.initialize()
    session_id = client.new_session()
    for n in range(3):
        assert client.prompt(session_id, f"/echo turn {n}").result() == {"stopReason": "end_turn"}
        # Read by another connection at once, as another process would.
        reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            ended = reader.execute("SELECT count(*) FROM turns WHERE session_id = ? AND ended_at IS NOT NULL",
                                   (session_id,)).fetchone()[0]
            settled = reader.execute("SELECT count(*) FROM usage WHERE session_id = ? AND stop_reason = 'end_turn'",
                                     (session_id,)).fetchone()[0]
        finally:
            reader.close()
        assert (ended, settled) == (n + 1, n + 1)

