"""How the SQLite store's thread runs its transactions: each all or nothing, and those that waited for the thread
committed together (one commit for many runs' writes)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import outcome

from yao_actors.errors import StoreUnavailable
from yao_actors.store.sqlite.files import WatchedFiles

T = TypeVar("T")

#: What fails a batch as a whole, so that each of its works runs again alone: SQLite's own errors, and what
#: :meth:`WatchedFiles.check` raises (the files in doubt; an ``OSError`` of the ``stat`` or ``ioctl`` behind it).
_BATCH_FAILURES = (sqlite3.Error, StoreUnavailable, OSError)


def run_together(
    connection: sqlite3.Connection, files: WatchedFiles, works: Sequence[Callable[[], Any]]
) -> list[outcome.Outcome[Any]]:
    """Run ``works`` (transactions waiting for the store's thread) in one write transaction, each under its own
    savepoint: one commit for what many runs wrote while the thread was busy (SQLite's cost per transaction is
    its commit). A work that raises is rolled back to its savepoint alone (a ``RunIdTaken``, an ``UnknownRun``);
    the others are committed. When SQLite itself fails (busy, full, an I/O error) or the files are in doubt
    (``_BATCH_FAILURES``), all of it is rolled back and each work runs again in a transaction of its own, so
    that each gets its own error and none is lost for another's. Every work gets its outcome, after the commit;
    anything else raised here is a bug, and reaches each work's caller (``worker._run_batch``)."""
    if len(works) > 1:
        try:
            files.check()
            connection.execute("BEGIN IMMEDIATE")
            results = []
            for work in works:
                connection.execute("SAVEPOINT work")
                result = outcome.capture(work)
                if isinstance(result, outcome.Error):
                    if isinstance(result.error, sqlite3.Error):
                        raise result.error
                    connection.execute("ROLLBACK TO work")
                connection.execute("RELEASE work")
                results.append(result)
            connection.execute("COMMIT")
            return results
        except _BATCH_FAILURES:
            pass  # each runs alone, below
        finally:
            if connection.in_transaction:  # not committed: neither a failure nor a bug leaves it open
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
    return [outcome.capture(_alone, connection, files, work) for work in works]


def _alone(connection: sqlite3.Connection, files: WatchedFiles, work: Callable[[], T]) -> T:
    files.check()
    return transaction(connection, lambda _: work())


def transaction(connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in one write transaction: all of it is committed, or none of it."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result
