"""The files under a SQLite store, watched: what is done to them from outside must not kill or fool the process.

A WAL-mode database is three files: the database, its write-ahead log (``-wal``) and, when several processes
share it, the WAL index (``-shm``), which every connection maps into its memory and writes on every
transaction. Two things done to them from outside defeat SQLite's own error handling (issue 29):

- **The** ``-shm`` **made unwritable while mapped** (``chattr +i``): the kernel answers the next write to the
  mapping with ``SIGBUS``, which kills the process with nothing logged. A store that is the only one on its
  file (``exclusive``) has no ``-shm``: ``locking_mode = EXCLUSIVE`` before the file's first WAL access
  makes SQLite keep the index in the process's own memory, so nothing done to a file can do that (an
  unwritable database or ``-wal`` is an I/O error like any other). A shared store checks the ``-shm``'s
  immutable and append-only attributes before each call (one ``ioctl``) and refuses the call instead;
  that check cannot cover the instant between it and SQLite's write, so an attribute set in the middle of
  a transaction still kills a shared worker (``--workers`` restarts it, and the new one refuses the file).
- **A file deleted or replaced while open**: SQLite goes on with the unlinked inode, acknowledging writes
  that nobody finds once the process restarts. Each call compares the device and inode its paths name
  with those the store opened (one ``stat`` each); a mismatch refuses the call, and :meth:`WatchedFiles.problem`
  tells readiness (``/readyz``) until the paths name the store's files again.

Both refusals are :class:`~yao_actors.errors.StoreUnavailable`, so a run meeting one ends ``store_unavailable``.
The checks run in the store's thread, before each call: 5-30 us on a loaded 2-core machine (a turn's
``append_turn`` is 180-220 us of CPU there), the ``stat`` calls most of it.
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
import sys
from typing import Final

import attrs

from yao_actors.errors import StoreUnavailable

FS_IOC_GETFLAGS: Final = 0x80086601
"""Linux's ``ioctl`` reading a file's attributes (``lsattr``; ``_IOR('f', 1, long)``)."""

UNWRITABLE_FLAGS: Final = {0x10: "immutable (chattr +i)", 0x20: "append-only (chattr +a)"}
"""The attributes (``FS_IMMUTABLE_FL``, ``FS_APPEND_FL``) under which writes to a mapping of the file fail."""

SUFFIXES: Final = ("", "-wal", "-shm")
"""The store's files: the database, its write-ahead log, its WAL index."""

_NO_ATTRIBUTES: Final = (errno.ENOTTY, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)
"""What ``ioctl`` answers on a filesystem without attributes (where none can be set either)."""


_LINUX: Final = sys.platform.startswith("linux")


def unwritable(fd: int) -> str | None:
    """The attribute that makes the open file ``fd`` unwritable, or ``None`` (also where there are none)."""
    if not _LINUX:
        return None
    flags = array.array("l", (0,))
    try:
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
    except OSError as error:
        if error.errno in _NO_ATTRIBUTES:
            return None
        raise
    return next((name for bit, name in UNWRITABLE_FLAGS.items() if flags[0] & bit), None)


def check_before_open(path: str, *, exclusive: bool) -> None:
    """Refuse files SQLite would map and could not write (the ``-shm`` of a shared store; the others too, for a
    clear message): :class:`StoreUnavailable` naming the file and its attribute."""
    for suffix in SUFFIXES if not exclusive else SUFFIXES[:2]:
        try:
            fd = os.open(path + suffix, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as error:
            raise StoreUnavailable(f"SQLite store {path}: cannot open {path + suffix}: {error}") from error
        try:
            attribute = unwritable(fd)
        finally:
            os.close(fd)
        if attribute is not None:
            raise StoreUnavailable(f"SQLite store {path}: {path + suffix} is {attribute}; SQLite cannot write it")


def _identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


@attrs.define(eq=False)
class WatchedFiles:
    """The files of an open store, as opened (:func:`watch_files`): :meth:`check` before each call."""

    path: str
    opened: dict[str, tuple[int, int]]
    """Each file's path, and its device and inode when the store opened it."""
    shm: int | None = None
    """The ``-shm`` SQLite maps (a descriptor of our own on it), for a shared store."""

    def problem(self) -> str | None:
        """What is wrong with the store's files now, or ``None``."""
        for name, identity in self.opened.items():
            now = _identity(name)
            if now != identity:
                how = "deleted" if now is None else "replaced by another file"
                return (
                    f"{name} was {how} while the store had it open: what the store writes now would be lost at "
                    "the next start, so it takes no more writes (put the file back, or restart the service)"
                )
        if self.shm is not None:
            attribute = unwritable(self.shm)
            if attribute is not None:
                return f"{self.path}-shm is {attribute}: SQLite cannot write its WAL index"
        return None

    def explain(self) -> str | None:
        """Why a call failed, if its files say: :meth:`problem`, or an unwritable attribute of any of them
        (looked up only after an error: each is an ``open`` and an ``ioctl``)."""
        problem = self.problem()
        if problem is not None:
            return problem
        try:
            check_before_open(self.path, exclusive=False)
        except StoreUnavailable as error:
            return str(error).removeprefix(f"SQLite store {self.path}: ")
        return None

    def check(self) -> None:
        """:class:`StoreUnavailable` when :meth:`problem` finds one."""
        problem = self.problem()
        if problem is not None:
            raise StoreUnavailable(f"SQLite store {self.path}: {problem}")

    def close(self) -> None:
        if self.shm is not None:
            os.close(self.shm)
            self.shm = None


def watch_files(path: str, *, exclusive: bool) -> WatchedFiles:
    """The store's files as they are now, just after the store opened them (its connection has them open)."""
    names = [path + suffix for suffix in (SUFFIXES[:2] if exclusive else SUFFIXES)]
    opened = {name: identity for name in names if (identity := _identity(name)) is not None}
    watched = WatchedFiles(path, opened)
    if not exclusive:
        watched.shm = os.open(path + "-shm", os.O_RDONLY | os.O_CLOEXEC)
    return watched
