"""Where sessions, their history and the usage ledger live.

| module | concern |
|---|---|
| `interface.py` | the `Store` interface the runtime writes to |
| `base.py` | `MemoryStore` (`--ephemeral`, the fallback) |
| `session_record.py` | `SessionRecord`: what the store keeps of a session |
| `turns.py` | what the store keeps of a turn (`TurnOutcome`, `StoredTurn`) and how history is read back (`HistoryPage`, `HistoryPosition`) |
| `threaded.py` | `ThreadedStore`: a database store on the hub, handing typed work to the store thread; the hub never touches the disk |
| `database.py` | `Database`: one connection to a state database as the store thread drives it, session ownership included |
| `sqlite.py` | `SqliteStore` and `SqliteDatabase`: the state directory's SQLite file and its session lock files |
| `postgres.py` | `PostgresStore` and `PostgresDatabase`: a PostgreSQL server (`--store`), its advisory locks owning sessions |
| `pg_connection.py` | connecting to PostgreSQL from the store thread without gevent and without holding the GIL |
| `session_locks.py` | `SessionLockFiles`: a live session's owner among processes on one state directory (an flock per session) |
| `store_thread.py` | `StoreThread`: the one OS thread that owns the database connection and runs the queued work in batches |
| `waiting_writes.py` | `WaitingWrites`: writes the disk cannot take now, kept in order and retried; reads answered past them |
| `backlog.py` | `HistoryBacklog`: history handed over and not committed yet, and the room a streaming turn waits for |
| `operations.py` | the typed work the store thread runs: which operations write, which are handed over at once |
| `statedb.py` | the schema and every SQL statement |
| `statedir.py` | the state directory: where it is, opening it, falling back to memory |
| `private.py` | keeping the state directory and database files the user's own: 0700/0600, no symlinks |
| `report.py` | what `acp-green sessions` and `acp-green usage` read and print |
| `opening.py` | `OpeningStore`: the store while it opens in the background (writes wait in order, reads wait for it) |

Importing the package imports none of them (not sqlite3 either): `serve` answers `initialize`
before the store is opened, so the names below load on first use.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {"MemoryStore": ".base", "Store": ".interface", "open_store": ".statedir", "OpeningStore": ".opening"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name, __name__), name)
    globals()[name] = value
    return value
