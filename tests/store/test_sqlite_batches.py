"""The SQLite store commits the transactions that waited for its thread together, each under its own savepoint:
one that fails is rolled back alone, a failure of SQLite itself (or of its files' check) gives each its own
error, and anything else (a bug) reaches each caller, not retried and not lost with the store's thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import outcome
import pytest
import trio

from yao_actors.errors import RunIdTaken, StoreUnavailable
from yao_actors.store import open_sqlite_store
from yao_actors.store.sqlite import SqliteStore
from yao_actors.store.sqlite.transactions import run_together
from yao_actors.store.sqlite.worker import WorkerThread, open_worker_thread

GUARD = 30


def _insert(thread: str) -> Any:
    return lambda db: db.execute("INSERT INTO threads VALUES (?, NULL, 1.0, 1.0)", (thread,)).rowcount


async def _many_at_once(store: SqliteStore, works: list[Any]) -> list[Any]:
    """Start every work's transaction while the store's thread is held busy, so they wait for it together."""
    results: list[Any] = [None] * len(works)
    gate = trio.Event()
    held = trio.Event()

    def hold(db: sqlite3.Connection) -> None:
        trio.from_thread.run_sync(held.set, trio_token=token)
        trio.from_thread.run(gate.wait, trio_token=token)

    async def one(index: int, work: Any) -> None:
        try:
            results[index] = await store.access.transaction(work)
        except Exception as error:
            results[index] = error

    token = trio.lowlevel.current_trio_token()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.access.transaction, hold)
        await held.wait()
        for index, work in enumerate(works):
            nursery.start_soon(one, index, work)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    return results


async def test_waiting_transactions_commit_together_and_a_failing_one_alone_is_rolled_back(tmp_path: Path) -> None:
    commits: list[str] = []
    with trio.fail_after(GUARD):
        async with open_sqlite_store(tmp_path / "c.sqlite3") as store:
            await store.open_thread("t", None)
            await store.start_run("t", "taken", "a", [])
            store._connection.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)

            def refused(db: sqlite3.Connection) -> None:
                db.execute("INSERT INTO threads VALUES ('half', NULL, 1.0, 1.0)")  # rolled back with its savepoint
                raise RunIdTaken("run 'taken' is already stored")

            results = await _many_at_once(store, [_insert("a"), refused, _insert("b"), _insert("c")])
            store._connection.set_trace_callback(None)
            threads = {t.thread_id for t in await store.list_threads()}
    assert results[0] == results[2] == results[3] == 1
    assert isinstance(results[1], RunIdTaken)
    assert threads == {"t", "a", "b", "c"}
    assert len(commits) == 2  # the holding transaction's, then one for the four that waited


async def test_a_failure_of_sqlite_in_a_batch_runs_each_alone_with_its_own_error(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with open_sqlite_store(tmp_path / "c.sqlite3") as store:

            def broken(db: sqlite3.Connection) -> None:
                db.execute("INSERT INTO no_such_table VALUES (1)")

            results = await _many_at_once(store, [_insert("a"), broken, _insert("b")])
            threads = {t.thread_id for t in await store.list_threads()}
    assert results[0] == results[2] == 1
    assert isinstance(results[1], StoreUnavailable)
    assert "no_such_table" in str(results[1])
    assert threads == {"a", "b"}


@attrs.define
class FilesInDoubt:
    """Files whose next check raises ``error`` (then they are fine): what ``run_together`` is given."""

    error: Exception | None

    def check(self) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error


def _table(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)  # as the store's: transactions are begun explicitly
    connection.execute("CREATE TABLE t (name TEXT PRIMARY KEY)")
    return connection


@pytest.mark.parametrize(
    "error", [StoreUnavailable("SQLite store: the files are in doubt"), PermissionError("stat: permission denied")]
)
def test_files_in_doubt_before_a_batch_run_each_alone(tmp_path: Path, error: Exception) -> None:
    """The batch's check of the files fails (then passes): nothing is lost, each commits on its own."""
    connection = _table(tmp_path / "c.sqlite3")
    commits: list[str] = []
    connection.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    works = [lambda name=name: connection.execute("INSERT INTO t VALUES (?)", (name,)).rowcount for name in "abc"]
    results = run_together(connection, FilesInDoubt(error), works)  # type: ignore[arg-type]
    assert [result.unwrap() for result in results] == [1, 1, 1]
    assert connection.execute("SELECT name FROM t ORDER BY name").fetchall() == [("a",), ("b",), ("c",)]
    assert len(commits) == 3  # one for each: the batch's transaction never began


def test_an_error_of_the_batch_itself_is_no_failure_to_retry_and_leaves_no_transaction_open(tmp_path: Path) -> None:
    """Not SQLite's nor the files': a bug is raised, not taken for a failure that re-runs each work alone."""
    connection = _table(tmp_path / "c.sqlite3")
    works = [lambda: connection.execute("INSERT INTO t VALUES ('a')").rowcount] * 2
    with pytest.raises(RuntimeError, match="a bug"):
        run_together(connection, FilesInDoubt(RuntimeError("a bug")), works)  # type: ignore[arg-type]
    assert not connection.in_transaction
    assert connection.execute("SELECT count(*) FROM t").fetchone() == (0,)


async def test_the_store_thread_hands_a_batch_runners_own_error_to_each_caller_and_goes_on() -> None:
    def runner(works: Sequence[Callable[[], Any]]) -> list[outcome.Outcome[Any]]:
        raise RuntimeError("a bug")

    errors: list[BaseException] = []

    async def call(worker: WorkerThread) -> None:
        try:
            await worker.run(lambda: 1, batch=runner)
        except RuntimeError as error:
            errors.append(error)

    with trio.fail_after(GUARD):
        async with open_worker_thread("test-store") as worker:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, worker)
                nursery.start_soon(call, worker)
            after = await worker.run(lambda: "still serving")
    assert [str(error) for error in errors] == ["a bug", "a bug"]
    assert after == "still serving"


@pytest.mark.parametrize("count", [1, 70])
async def test_every_waiting_transaction_gets_its_answer(tmp_path: Path, count: int) -> None:
    with trio.fail_after(GUARD):
        async with open_sqlite_store(tmp_path / "c.sqlite3") as store:
            works = [_insert(f"t{n}") for n in range(count)]
            results = await _many_at_once(store, works)
            stored = await store.list_threads(limit=1000)
    assert results == [1] * count
    assert len(stored) == count
