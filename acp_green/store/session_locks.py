"""`SessionLockFiles`: which process owns a session of a SQLite state directory.

A live session belongs to one serving process at a time, or two of them would each keep a live
copy and overwrite the other's writes. The owner holds an exclusive `flock` on the session's lock
file (`locks/<sha256 of the id>.lock` in the state directory): the kernel drops it when the
process dies, even by SIGKILL, so there is no lease to renew and nothing stale to clean up.
Anyone else is refused with the holder's own line (pid, host, since when), which the owner
writes into the file.

The file stays when its owner lets the session go (creating and removing a file per session
cost ~220 us of the store thread's time on ext4; opening an existing one a few): it goes when
the session is deleted, removed while still locked. Someone who opened the old file just before
may then lock an unlinked file; so after locking, the path must still name the locked file (same
device and inode), or the lock is worthless and taken again. A descriptor is held per owned
session: `raise_open_file_limit` lifts the soft limit to the hard one when the store opens.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import resource
import socket
import time

from . import private

LOCKS_DIR = "locks"


class SessionLockFiles:
    """The lock files of one state directory; used by the store thread only."""

    def __init__(self, state_dir: str) -> None:
        self.directory = os.path.join(state_dir, LOCKS_DIR)
        private.secure_dir(self.directory)
        self._held: dict[str, int] = {}  # session id -> the descriptor holding its lock
        self._deleted: set[str] = set()  # held sessions whose file goes when they are let go
        self._identity = f"pid {os.getpid()} on {socket.gethostname()}"

    def path(self, session_id: str) -> str:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.directory, f"{digest}.lock")

    def lock(self, session_id: str) -> str | None:
        """Take the session for this process (never waits): None once ours, else the holder's line."""
        if session_id in self._held:
            return None
        path = self.path(session_id)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = _holder(fd)
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return holder
                raise
            if _names(path, fd):
                break
            os.close(fd)  # the file was removed (and maybe made again) meanwhile: lock what the path names now
        self._held[session_id] = fd
        try:  # who holds it, for the error another process gets; the lock is what counts
            os.ftruncate(fd, 0)
            os.write(fd, f"{self._identity}, since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
        except OSError:
            pass
        return None

    def deleted(self, session_id: str) -> None:
        """The session is deleted: its file goes when it is let go."""
        if session_id in self._held:
            self._deleted.add(session_id)

    def unlock(self, session_id: str) -> None:
        """Let the session go (nothing if not held); a deleted one's file is removed while still locked."""
        fd = self._held.pop(session_id, None)
        if fd is None:
            return
        try:
            if session_id in self._deleted:
                self._deleted.discard(session_id)
                os.unlink(self.path(session_id))
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        """Let every session go."""
        for session_id in list(self._held):
            self.unlock(session_id)


def _names(path: str, fd: int) -> bool:
    """`path` still names the open file `fd`."""
    try:
        on_disk = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 300, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return f"another acp-green process ({text or 'pid unknown'})"


def raise_open_file_limit() -> None:
    """Lift the soft limit on open descriptors to the hard one: each owned session holds one."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20), hard))
    except (OSError, ValueError):
        pass  # the limit stays; a session over it is refused with the error naming it
