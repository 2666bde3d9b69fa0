"""The SQLite store commits the transactions that waited for its thread together, each under its own savepoint:
one that fails is rolled back alone, and a failure of SQLite itself gives each its own error."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from yao_actors.errors import RunIdTaken, StoreUnavailable
from yao_actors.store import open_sqlite_store
from yao_actors.store.sqlite import SqliteStore

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
            results[index] = await store.transaction(work)
        except Exception as error:
            results[index] = error

    token = trio.lowlevel.current_trio_token()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.transaction, hold)
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


@pytest.mark.parametrize("count", [1, 70])
async def test_every_waiting_transaction_gets_its_answer(tmp_path: Path, count: int) -> None:
    with trio.fail_after(GUARD):
        async with open_sqlite_store(tmp_path / "c.sqlite3") as store:
            works = [_insert(f"t{n}") for n in range(count)]
            results = await _many_at_once(store, works)
            stored = await store.list_threads(limit=1000)
    assert results == [1] * count
    assert len(stored) == count
