"""What one session/fork costs the SQLite store: the fork's commit, the file's growth, and how long
a trivial read queued right behind it waits.

Builds a session of ~HISTORY_MB of history in a fresh SqliteStore through the store API
(begin_turn/append_history/end_turn, TURNS turns), then:

  1. one fork: `fork_history` then `sync()` (the ForkHistory commit), with a `load_session` of
     another session queued right behind the fork (its latency is what a session/cancel or a
     session/list waits);
  2. FORKS-1 more forks queued at once, with one read behind them (a read over READ_TIMEOUT
     fails with StoreUnavailable, which is printed, not raised);
  3. the database's size before and after the forks (file, WAL, and pages in use);
  4. deleting the source, then every fork: the latency of a read behind each delete, and how long
     the background purge takes to leave no history row (polled on a direct connection).

`--copy-rows` forks the way the store did before history was shared (schema 5's
statedb.fork_history, kept below): every history row of the source's ended turns is copied. It
is patched into statedb, so it runs on the store thread exactly as it used to.

    .venv/bin/python scripts/fork_cost.py                 # shared history (schema 6)
    .venv/bin/python scripts/fork_cost.py --copy-rows     # the old copy, for comparison

Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from acp_green.store import statedb  # noqa: E402
from acp_green.store.operations import StoreUnavailable  # noqa: E402
from acp_green.store.session_record import SessionRecord  # noqa: E402
from acp_green.store.sqlite import SqliteStore  # noqa: E402
from acp_green.store.turns import TurnOutcome  # noqa: E402

MiB = 1 << 20


def copy_rows_fork_history(conn: sqlite3.Connection, source_id: str, fork_id: str) -> None:
    """statedb.fork_history as it was at schema 5: each ended turn and all its history rows copied
    (on a schema-6 database the copied turn's rows are its own: history_turn = its id)."""
    has_history_turn = "history_turn" in {column for _, column, *_ in conn.execute("PRAGMA table_info(turns)")}
    source, fork = statedb._column(source_id), statedb._column(fork_id)
    ended = conn.execute("SELECT id FROM turns WHERE session_id = ? AND ended_at IS NOT NULL ORDER BY id", (source,)).fetchall()
    for (old,) in ended:
        new = conn.execute(
            """INSERT INTO turns (session_id, turn_id, started_at, ended_at, stop_reason, error, complete)
               SELECT ?, turn_id, started_at, ended_at, stop_reason, error, complete FROM turns WHERE id = ?""",
            (fork, old),
        ).lastrowid
        if has_history_turn:
            conn.execute("UPDATE turns SET history_turn = id WHERE id = ?", (new,))
        conn.execute(
            "INSERT INTO history (session_id, turn, seq, entries) SELECT ?, ?, seq, entries FROM history WHERE turn = ? ORDER BY id",
            (fork, new, old),
        )


def sizes(path: str) -> dict[str, float]:
    """MiB of the database file, its WAL, and of the pages in use (page_count - freelist)."""
    probe = sqlite3.connect(path, timeout=30)
    try:
        page_size = probe.execute("PRAGMA page_size").fetchone()[0]
        pages = probe.execute("PRAGMA page_count").fetchone()[0] - probe.execute("PRAGMA freelist_count").fetchone()[0]
        rows = probe.execute("SELECT count(*) FROM history").fetchone()[0]
    finally:
        probe.close()
    wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
    return {"file_MiB": round(os.path.getsize(path) / MiB, 1), "wal_MiB": round(wal / MiB, 1),
            "in_use_MiB": round(pages * page_size / MiB, 1), "history_rows": rows}


def update(turn: int, n: int, size: int) -> bytes:
    text = (f"turn {turn} chunk {n} " + "x" * size)[:size]
    return json.dumps({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}).encode()


def build(store, turns: int, history_mb: float, chunk: int) -> int:
    """Session "src" of `turns` ended turns (prompt + chunks) totalling ~history_mb MiB; its bytes."""
    per_turn = max(chunk, int(history_mb * MiB / turns))
    chunks = max(1, round(per_turn / (chunk + 80)))  # an update is its text and ~80 bytes of JSON
    total = 0
    store.save_session(SessionRecord("src", "/tmp", title="source"))
    store.save_session(SessionRecord("other", "/tmp", title="other"))
    for index in range(turns):
        turn_id = f"t{index}"
        prompt = [json.dumps({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": f"q{index}"}}).encode()]
        store.begin_turn("src", turn_id, float(index), prompt)
        pieces = [update(index, n, chunk) for n in range(chunks)]
        store.wait_for_history_room()
        store.append_history("src", turn_id, pieces)
        store.end_turn("src", turn_id, TurnOutcome("end_turn"))
        total += sum(map(len, prompt)) + sum(map(len, pieces))
        if index % 200 == 199:
            store.sync()
    store.sync()
    return total


def timed_read(store) -> float | str:
    started = time.monotonic()
    try:
        store.load_session("other")
    except StoreUnavailable as exc:
        return f"StoreUnavailable after {time.monotonic() - started:.2f} s ({exc})"
    return round(time.monotonic() - started, 3)


def history_rows(path: str) -> int:
    probe = sqlite3.connect(path, timeout=30)
    try:
        return probe.execute("SELECT count(*) FROM history").fetchone()[0]
    finally:
        probe.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history-mb", type=float, default=200.0, help="history of the source session (MiB)")
    parser.add_argument("--turns", type=int, default=10_000, help="ended turns of the source session")
    parser.add_argument("--chunk", type=int, default=2000, help="bytes of text per stored update")
    parser.add_argument("--forks", type=int, default=5)
    parser.add_argument("--copy-rows", action="store_true", help="fork by copying every history row (the schema-5 way)")
    parser.add_argument("--no-delete", action="store_true", help="skip the delete/purge measurement")
    parser.add_argument("--dir", help="where to make the state directory (default: a temporary one, removed)")
    args = parser.parse_args()

    if args.copy_rows:
        statedb.fork_history = copy_rows_fork_history  # type: ignore[assignment]  # the store thread calls it
    base = args.dir or tempfile.mkdtemp(prefix="fork_cost.")
    state = os.path.join(base, "state")
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state, mode=0o700)
    path = statedb.db_path(state)
    mode = "copy rows (schema-5 fork, patched in)" if args.copy_rows else "this code's fork_history"
    print(f"mode: {mode}; schema {statedb.SCHEMA_VERSION}; {path}")
    store = SqliteStore(path)
    try:
        started = time.monotonic()
        total = build(store, args.turns, args.history_mb, args.chunk)
        print(f"built: {args.turns} turns, {total / MiB:.1f} MiB of updates in {time.monotonic() - started:.1f} s")
        before = sizes(path)
        print("size before forks:", before)

        store.save_session(SessionRecord("fork0", "/tmp", forked_from="src"))
        store.sync()
        started = time.monotonic()
        store.fork_history("src", "fork0")
        read = timed_read(store)
        store.sync()
        print(f"fork 1: commit {time.monotonic() - started:.3f} s; load_session queued behind it: {read} s")

        for n in range(1, args.forks):
            store.save_session(SessionRecord(f"fork{n}", "/tmp", forked_from="src"))
        store.sync()
        started = time.monotonic()
        for n in range(1, args.forks):
            store.fork_history("src", f"fork{n}")
        read = timed_read(store)
        try:
            store.sync()
        except StoreUnavailable as exc:
            print(f"  sync: StoreUnavailable ({exc}); waiting for the forks to commit")
            while True:
                try:
                    store.sync()
                    break
                except StoreUnavailable:
                    pass
        print(f"forks 2-{args.forks} queued at once: all committed after {time.monotonic() - started:.3f} s; "
              f"load_session queued behind them: {read}")
        after = sizes(path)
        print(f"size after {args.forks} forks:", after)
        print(f"growth: file {after['file_MiB'] - before['file_MiB']:+.1f} MiB, in use {after['in_use_MiB'] - before['in_use_MiB']:+.1f} MiB, "
              f"wal {after['wal_MiB'] - before['wal_MiB']:+.1f} MiB, history rows {after['history_rows'] - before['history_rows']:+d}")
        check = store.history_page("fork0", None, 5, 1 << 20)
        print(f"fork0's first entries: {[e.turn_id for e in check.entries]}")

        if not args.no_delete:
            started = time.monotonic()
            store.delete_session("src")
            read = timed_read(store)
            print(f"delete src: load_session behind it {read} s; forks' turns still {len(store.turns('fork0'))}")
            for n in range(args.forks):
                store.delete_session(f"fork{n}")
            read = timed_read(store)
            started = time.monotonic()
            while history_rows(path) and time.monotonic() - started < 600:
                time.sleep(0.5)
            print(f"delete {args.forks} forks: load_session behind them {read} s; purge left "
                  f"{history_rows(path)} history rows after {time.monotonic() - started:.1f} s")
    finally:
        store.close()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
