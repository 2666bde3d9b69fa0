"""The SQLite store's way in, one for all its parts: the store, its leases, its held calls and its token records
each run their statements through the same :class:`SqliteAccess` (the connection, in the store's own thread; the
store's files, checked before each call; its clock).

Whatever SQLite raises leaves as :class:`~yao_actors.errors.StoreUnavailable` (:meth:`SqliteAccess.transaction`,
:meth:`SqliteAccess.query`): a run meeting it ends ``store_unavailable``, and the process goes on.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import attrs

from yao_actors.errors import StoreUnavailable
from yao_actors.store.sqlite.files import WatchedFiles
from yao_actors.store.sqlite.transactions import run_together
from yao_actors.store.sqlite.worker import Batch, WorkerThread

T = TypeVar("T")

logger = logging.getLogger(__name__)


def unavailable(path: str, error: BaseException | str) -> StoreUnavailable:
    """The store in the file at ``path`` failed: what the log is told (clients hear only that it is unavailable)."""
    return StoreUnavailable(f"SQLite store {path}: {error}")


def _is_unavailability(error: sqlite3.Error) -> bool:
    """Locked, read-only, I/O or not-a-database errors: the file's state, not a bug (an integrity or programming
    error is one, or a file changed under the store; it ends the run ``store_unavailable`` all the same)."""
    return type(error) in (sqlite3.OperationalError, sqlite3.DatabaseError)


@attrs.define(eq=False)
class SqliteAccess:
    """What every part of a SQLite store uses of it: made by the store, handed to its leases, held calls and
    token records."""

    path: str
    connection: sqlite3.Connection
    worker: WorkerThread
    files: WatchedFiles
    """The store's files, checked before each call."""
    clock: Callable[[], float]
    """POSIX time (tests move it)."""
    event_ttl: float
    """Seconds a run's events are kept after its last append."""
    _together: Batch = attrs.field(init=False)
    """How the store's thread runs the transactions that waited for it: in one (:func:`run_together`)."""

    @_together.default
    def _batch(self) -> Batch:
        return partial(run_together, self.connection, self.files)

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)`` in one transaction, in the store's thread: all of it is committed, or none of it.
        Transactions that wait for the thread while it is busy are committed together, each under its own
        savepoint (:func:`run_together`)."""
        connection = self.connection
        return await self._call(lambda: work(connection), batch=self._together)

    async def query(self, query: str, parameters: Sequence[Any]) -> list[Any]:
        """The rows of one read-only statement, in the store's thread."""
        return await self._call(lambda: self.connection.execute(query, parameters).fetchall())

    async def _call(self, work: Callable[[], T], *, batch: Batch | None = None) -> T:
        """Run blocking work on the connection in the store's thread: one call at a time, in the order
        they were made (the thread's queue keeps both; no lock is needed on this side).

        The thread is not abandoned on cancellation: a transaction that started
        finishes (or rolls back) before the cancellation is delivered. The store's files are checked first
        (:meth:`WatchedFiles.check`): a call they cannot take is refused before SQLite touches them.
        """
        files = self.files

        def checked() -> T:
            files.check()
            return work()

        try:
            return await self.worker.run(work, batch=batch) if batch else await self.worker.run(checked)
        except sqlite3.Error as error:
            # Every one of them: a store error never escapes a run or the process. Those the file's state
            # does not explain are logged with their traceback, to be looked into.
            if not _is_unavailability(error):
                logger.error("SQLite store %s: unexpected %s", self.path, type(error).__name__, exc_info=error)
            explained = files.explain()
            raise unavailable(self.path, f"{error} ({explained})" if explained else error) from error
