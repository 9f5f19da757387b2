"""Where sessions, their history and the usage ledger live.

| module | concern |
|---|---|
| `base.py` | the `Store` interface the runtime writes to, and `MemoryStore` (`--ephemeral`, the fallback) |
| `session_record.py` | `SessionRecord`: what the store keeps of a session |
| `turns.py` | what the store keeps of a turn (`TurnOutcome`, `StoredTurn`) and how history is read back (`HistoryPage`, `HistoryPosition`) |
| `sqlite.py` | `SqliteStore`: one store thread owns the SQLite connection; the hub never touches the disk |
| `operations.py` | the typed work the store thread runs: which operations write, which are handed over at once |
| `statedb.py` | the schema and every SQL statement |
| `statedir.py` | the state directory: where it is, opening it, falling back to memory |
| `private.py` | keeping the state directory and database files the user's own: 0700/0600, no symlinks |
| `report.py` | what `acp-green sessions` and `acp-green usage` read and print |
"""

from .base import MemoryStore, Store
from .statedir import open_store

__all__ = ["MemoryStore", "Store", "open_store"]
