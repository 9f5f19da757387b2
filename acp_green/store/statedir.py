"""Where state lives (`--state-dir`, `--ephemeral`) and opening the right store."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable

from .statedb import StateDbError, db_path
from .base import MemoryStore, Store

log = logging.getLogger(__name__)


def default_state_dir() -> str:
    """`$XDG_STATE_HOME/acp-green`, else `~/.local/state/acp-green`."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "acp-green")


def open_store(
    state_dir: str | None = None,
    ephemeral: bool = False,
    *,
    store_url: str | None = None,
    trace: Callable[[str], None] | None = None,
    page_limit: int | None = None,
) -> Store:
    """The PostgreSQL store at `store_url`, else the SQLite store in the state directory, or a
    MemoryStore (ephemeral, or a store that cannot be opened, said at WARNING).

    Call from a greenlet: the directory is created (or made private) and the database opened
    (and migrated) by the store thread while the caller waits cooperatively. A directory or
    file that is not safely ours (store/private.py) is refused like an unusable one.
    """
    if ephemeral:
        log.info("--ephemeral: sessions and usage are kept in memory only")
        return MemoryStore()
    if store_url is not None:
        return _open_server_store(store_url)
    path = state_dir or default_state_dir()
    try:
        from .sqlite import SqliteStore

        return SqliteStore(
            db_path(os.path.abspath(os.path.expanduser(path))), trace=trace, page_limit=page_limit, named_dir=state_dir is not None,
        )
    except (OSError, sqlite3.Error, StateDbError) as exc:
        log.warning(
            "state directory %s is unusable (%s): keeping sessions and usage in memory only; "
            "nothing of this run will survive a restart",
            path, exc,
        )
        return MemoryStore()


def _open_server_store(url: str) -> Store:
    from .database import StoreOpenError
    from .pg_connection import is_psycopg_error
    from .postgres import PostgresStore, redacted

    reason: Exception
    try:
        return PostgresStore(url)
    except (OSError, StoreOpenError, ImportError) as exc:
        reason = exc
    except Exception as exc:  # psycopg's own errors: the server refused or cannot be reached
        if not is_psycopg_error(exc):
            raise
        reason = exc
    log.warning(
        "the store %s cannot be opened (%s): keeping sessions and usage in memory only; "
        "nothing of this run will survive a restart", redacted(url), str(reason).strip(),
    )
    return MemoryStore()
