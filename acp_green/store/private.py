"""Keeping the state directory and its database files private to the user.

The state holds every conversation, so nothing may redirect it: the directory must be ours and
is tightened to 0700; the database and its -wal/-shm/-journal companions must be regular files
of ours, never reached through a symbolic link, and are 0600. Anything else is refused with
`StateDirRefused` (the caller then keeps state in memory and says why).

Checks run on open descriptors (O_NOFOLLOW, fstat, fchmod), not on names, so a name swapped
between the check and the change cannot redirect the change. Once the directory is ours and
0700, only we (or root) can change its entries, so SQLite's own later open of the checked name
reaches the checked file; the -wal and -shm SQLite creates get the database file's mode (0600).

All of it runs before this process opens the database: closing any descriptor of a file drops
every POSIX lock the process holds on it, SQLite's included, so no file SQLite has open may
be opened here.
"""

from __future__ import annotations

import errno
import logging
import os
import stat

from .statedb import StateDbError

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
COMPANIONS = ("-wal", "-shm", "-journal")


class StateDirRefused(StateDbError):
    """The state directory or a database file is not safely ours (owner, symlink, type)."""


def prepare(db_path: str, *, named: bool = False) -> None:
    """Make the directory of `db_path` and the database file safe to open; raises StateDirRefused.

    Creates what is missing (directory 0700, file 0600). `named`: the user chose the directory
    (--state-dir), so tightening it is said at WARNING; the default directory's at INFO.
    """
    secure_dir(os.path.dirname(db_path), named=named)
    secure_file(db_path, create=True)
    secure_companions(db_path)


def secure_dir(path: str, *, named: bool = False) -> None:
    """Create `path` 0700, or make an existing directory of ours 0700."""
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        _require_ours(info, path, "state directory")
        loose = stat.S_IMODE(info.st_mode) & ~DIR_MODE
        if loose:
            try:
                os.fchmod(fd, DIR_MODE)
            except OSError as exc:
                raise StateDirRefused(f"cannot make the state directory {path} private (0700): {exc.strerror}") from None
            log.log(
                logging.WARNING if named else logging.INFO,
                "state directory %s was mode %04o (open to other users); changed it to 0700: it holds your conversations",
                path, stat.S_IMODE(info.st_mode),
            )
    finally:
        os.close(fd)


def secure_file(path: str, *, create: bool) -> bool:
    """Make `path` a private regular file of ours (creating it 0600, read-write, if `create`);
    False if it is absent."""
    flags = (os.O_RDWR if create else os.O_RDONLY) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        if create:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
            except FileExistsError:
                fd = os.open(path, flags)
        else:
            fd = os.open(path, flags)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDirRefused(f"{path} is a symbolic link; the state is never opened through one") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateDirRefused(f"{path} is not a regular file")
        _require_ours(info, path, "file")
        if info.st_nlink != 1:
            raise StateDirRefused(f"{path} has {info.st_nlink} hard links; the state file must have one")
        if stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def secure_companions(db_path: str) -> None:
    """The -wal/-shm/-journal files SQLite opens by name: private regular files of ours, or absent."""
    for suffix in COMPANIONS:
        secure_file(db_path + suffix, create=False)


def refuse_symlink(path: str) -> None:
    """For readers that must not change anything: refuse `path` if it is a symbolic link."""
    if os.path.islink(path):
        raise StateDirRefused(f"{path} is a symbolic link; the state is never opened through one")


def _require_ours(info: os.stat_result, path: str, what: str) -> None:
    if info.st_uid != os.geteuid():
        raise StateDirRefused(f"the {what} {path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()})")
