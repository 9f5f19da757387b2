"""One serving process per state directory: an exclusive `flock` on `state.lock` beside the database.

Two agents writing one database would each keep their own live copy of a session and overwrite
the other's (a later prompt in one reverting a `set_mode` in the other, both prompting one
session, one bringing back a session the other deleted). Rather than leases per session, the
first `acp-green serve` to open a state directory holds this lock for its whole life, and a
second one is refused at once with a message naming the holder; it then keeps its state in
memory (statedir.open_store), and says so. The kernel drops the lock when its holder dies, even
by SIGKILL, so there is no stale lock to clean up and no clock or pid reuse to trust. `flock`
locks are not the POSIX locks SQLite takes, so neither disturbs the other.

The inspection commands (`acp-green sessions`, `acp-green usage`) do not take it: they read
through WAL, and `sessions delete` is one short transaction (docs/SESSIONS.md says what it
means for a running agent).
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

from . import private
from .statedb import StateDbError

LOCK_NAME = "state.lock"


class StateDirInUse(StateDbError):
    """Another process serves from this state directory."""


def lock_state_dir(db_path: str) -> int:
    """Take the state directory's lock (non-blocking) and note who holds it; the descriptor to
    keep open while serving (closing it releases the lock). Raises StateDirInUse."""
    path = os.path.join(os.path.dirname(db_path), LOCK_NAME)
    private.secure_file(path, create=True)
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StateDirInUse(
                f"another acp-green ({holder}) serves from {os.path.dirname(db_path)}; one process per state "
                "directory (give this one its own --state-dir)"
            ) from None
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
    return fd


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "pid unknown"
