"""Round-trip latency of the threaded store, SQLite against PostgreSQL, as a serving process sees it.

In a monkey-patched process (as `acp-green serve` runs), times N operations of each kind from a
greenlet: a session save followed by `sync` (the save handed to the store thread, committed, and
the answer back on the hub), and a `load_session` (a read answered by the store thread). Prints the
median and p99 of each, in milliseconds, per store; and what making a stored session live costs
in ownership: its lock claimed, then released once committed.

    .venv/bin/python scripts/store_latency.py --sqlite-dir /tmp/latency-sqlite \\
        --postgres postgresql://USER:PASSWORD@HOST:PORT/DB [-n 2000]

The SQLite database is made in --sqlite-dir (which should be empty or absent); the PostgreSQL
store uses the schema acp_green of the database named (made if absent), writing sessions named
latency-*. Either store may be left out.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - after patching, as serve does
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from acp_green.store import statedb  # noqa: E402
from acp_green.store.session_record import SessionRecord  # noqa: E402
from acp_green.store.threaded import ThreadedStore  # noqa: E402


def measure(store: ThreadedStore, count: int) -> dict[str, list[float]]:
    """Seconds each operation took, by kind, after a warm-up."""
    run = uuid.uuid4().hex[:8]
    ids = [f"latency-{run}-{n % 50}" for n in range(count)]
    for sid in ids[:50]:  # warm-up: the rows exist, statements are prepared
        store.save_session(SessionRecord(sid, "/w", title="warm-up"))
        store.sync()
        store.load_session(sid)
    timings: dict[str, list[float]] = {"save_session + sync": [], "load_session": [], "claim + release": []}
    clock = time.perf_counter
    for n, sid in enumerate(ids):
        record = SessionRecord(sid, "/work/project", ["/work/other"], f"title {n}", "code", {"model": "m", "n": n}, float(n))
        started = clock()
        store.save_session(record)
        store.sync()
        timings["save_session + sync"].append(clock() - started)
        started = clock()
        loaded = store.load_session(sid)
        timings["load_session"].append(clock() - started)
        assert loaded is not None and loaded.title == f"title {n}"
        # What making a stored session live costs: its lock taken (a round trip to the store
        # thread, and to the server for PostgreSQL), then let go once committed.
        started = clock()
        assert store.claim_session(sid) is None
        store.release_session(sid)
        store.wait_committed()
        timings["claim + release"].append(clock() - started)
    return timings


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqlite-dir", help="a directory for the SQLite state database")
    parser.add_argument("--postgres", help="a postgresql:// URL")
    parser.add_argument("-n", type=int, default=2000, help="operations of each kind (default 2000)")
    options = parser.parse_args()
    if not options.sqlite_dir and not options.postgres:
        parser.error("give --sqlite-dir, --postgres or both")
    stores: list[tuple[str, ThreadedStore]] = []
    if options.sqlite_dir:
        from acp_green.store.sqlite import SqliteStore

        os.makedirs(options.sqlite_dir, mode=0o700, exist_ok=True)
        stores.append(("SqliteStore", SqliteStore(statedb.db_path(options.sqlite_dir))))
    if options.postgres:
        from acp_green.store.postgres import PostgresStore

        stores.append(("PostgresStore", PostgresStore(options.postgres)))
    rows = []
    for name, store in stores:
        try:
            timings = measure(store, options.n)
        finally:
            store.close()
        for kind, values in timings.items():
            rows.append((name, kind, len(values), statistics.median(values) * 1000, percentile(values, 0.99) * 1000))
    print(f"{'store':<14} {'operation':<20} {'n':>6} {'median ms':>10} {'p99 ms':>8}")
    for name, kind, count, median, p99 in rows:
        print(f"{name:<14} {kind:<20} {count:>6} {median:>10.3f} {p99:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
