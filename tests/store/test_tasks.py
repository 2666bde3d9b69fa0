"""The open tasks of runs (``store.tasks()``), the contract over every backend (memory, SQLite in tmp_path, a real
redis-server): a handle saved whole and read back by thread and by run, replaced by a save of the same task,
removed once, gone with its thread, refused for a thread never opened; and an SQLite file of schema version 6
upgraded to keep them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import attrs
import pytest
import trio

from tests.store.conftest import Clock
from tests.store.sqlite_files import write_file_of_version
from tests.store.test_leases import GUARD
from yao_actors.errors import CorruptTaskRecord, StoreError, UnknownThread
from yao_actors.specs import StoreSpec
from yao_actors.store import ConversationStore, open_store
from yao_actors.store.memory.tasks import MemoryTasks
from yao_actors.store.protocol import TaskRecords
from yao_actors.store.redis.keys import escape
from yao_actors.store.redis.tasks import RedisTasks, tasks_key
from yao_actors.store.sqlite.tasks import SqliteTasks
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.store.tasks import encode_handle


def handle(
    task_id: str = "task-1", *, thread_id: str = "t1", run_id: str = "r1", created_at: float = 100.0
) -> TaskHandle:
    return TaskHandle(
        server="research",
        task_id=task_id,
        design=TaskDesign.EXTENSION,
        call_id=f"call-{task_id}",
        tool="deep_research",
        arguments={"query": "naïve ✓ 北京", "depth": 3, "nested": {"list": [1, None, True]}},
        run_id=run_id,
        thread_id=thread_id,
        created_at=created_at,
        deadline=created_at + 3600,
        poll_interval=0.5,
        principal="alice",
        session_id="session-9",
    )


def tasks_of(store: ConversationStore) -> TaskRecords:
    tasks = store.tasks()
    assert tasks is not None
    return tasks


async def test_a_saved_handle_reads_back_whole_by_thread_and_by_run(store: ConversationStore) -> None:
    tasks = tasks_of(store)
    with trio.fail_after(GUARD):
        await store.open_thread("t1", "alice")
        await store.start_run("t1", "r1", "a", [{"role": "user", "content": "go"}])
        await store.start_run("t1", "r2", "a", [])
        later, first, other_run = handle("b", created_at=200.0), handle("a"), handle("c", run_id="r2")
        handshake = attrs.evolve(handle("d", created_at=50.0), design=TaskDesign.HANDSHAKE_ERA, principal=None)
        for saved in (later, first, other_run, handshake):
            await tasks.save(saved)
        assert await tasks.for_thread("t1") == [handshake, first, other_run, later]
        assert await tasks.for_run("r1") == [handshake, first, later]
        assert await tasks.for_run("r2") == [other_run]
        assert await tasks.for_run("unknown") == []
        assert await tasks.for_thread("unknown") == []


async def test_a_save_of_the_same_task_replaces_it_and_a_remove_is_once(store: ConversationStore) -> None:
    tasks = tasks_of(store)
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "a", [])
        await tasks.save(handle())
        moved = attrs.evolve(handle(), poll_interval=5.0, session_id=None)
        await tasks.save(moved)
        assert await tasks.for_thread("t1") == [moved]
        assert await tasks.remove("t1", "task-1")
        assert not await tasks.remove("t1", "task-1")
        assert await tasks.for_thread("t1") == []
        assert await tasks.for_run("r1") == []


async def test_the_same_task_id_on_two_threads_is_two_handles(store: ConversationStore) -> None:
    tasks = tasks_of(store)
    with trio.fail_after(GUARD):
        for thread_id in ("t1", "t:2%"):  # an id with the characters a Redis key escapes
            await store.open_thread(thread_id, None)
            await store.start_run(thread_id, f"run-{thread_id}", "a", [])
            await tasks.save(handle(thread_id=thread_id, run_id=f"run-{thread_id}"))
        assert await tasks.remove("t:2%", "task-1")
        kept = handle(thread_id="t1", run_id="run-t1")
        assert await tasks.for_thread("t1") == [kept]
        assert await tasks.for_run("run-t1") == [kept]
        assert await tasks.for_thread("t:2%") == []


async def test_handles_go_with_their_thread_and_need_an_opened_one(store: ConversationStore) -> None:
    tasks = tasks_of(store)
    with trio.fail_after(GUARD):
        with pytest.raises(UnknownThread):
            await tasks.save(handle())
        assert await tasks.for_thread("t1") == []
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "a", [])
        await tasks.save(handle())
        assert await store.forget_thread("t1")
        assert await tasks.for_thread("t1") == []
        assert await tasks.for_run("r1") == []
        await store.open_thread("t1", None)  # a new thread of the same id starts with no tasks
        assert await tasks.for_thread("t1") == []


async def test_handles_outlive_the_store_object_of_a_durable_store_only(spec: StoreSpec, clock: Clock) -> None:
    with trio.fail_after(GUARD):
        async with open_store(spec, clock=clock) as store:
            await store.open_thread("t1", None)
            await store.start_run("t1", "r1", "a", [])
            await tasks_of(store).save(handle())
            durable = store.durable
        async with open_store(spec, clock=clock) as reopened:
            assert await tasks_of(reopened).for_run("r1") == ([handle()] if durable else [])


async def test_an_sqlite_file_of_schema_version_6_gets_its_tasks_table(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    write_file_of_version(path, 6, "INSERT INTO threads VALUES ('t1', 'alice', 1.0, 1.0)")
    with trio.fail_after(GUARD):
        async with open_store(StoreSpec.sqlite(path)) as store:
            await tasks_of(store).save(handle())
            assert await tasks_of(store).for_thread("t1") == [handle()]
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(7,)]
    assert db.execute("SELECT thread_id, task_id, run_id FROM tasks").fetchall() == [("t1", "task-1", "r1")]
    db.close()


async def test_a_lease_taken_leaves_a_run_with_an_open_task_running(store: ConversationStore) -> None:
    tasks = tasks_of(store)
    leases = store.leases()
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "a", [])
        await tasks.save(handle())
        taken = await leases.take("t1", "sweeper", 30, also_close="r1")
        assert taken.taken
        assert taken.closed == ()
        run = await store.get_run("r1")
        assert run is not None
        assert run.status.value == "running"
        await leases.release("t1", "sweeper")
        assert await tasks.remove("t1", "task-1")
        taken = await leases.take("t1", "sweeper", 30, also_close="r1")
        if not store.durable:
            assert taken.closed == ()  # a store of one process: its runs live and die with it, none is closed
            return
        assert taken.closed == ("r1",)  # without its task, a run left running is closed as before
        run = await store.get_run("r1")
        assert run is not None
        assert run.status.value == "interrupted"


async def write_raw(store: ConversationStore, thread_id: str, task_id: str, run_id: str, text: str) -> None:
    """Put ``text`` where the store keeps the record of task ``task_id`` (a record gone bad on disk)."""
    tasks = tasks_of(store)
    if isinstance(tasks, MemoryTasks):
        tasks._handles[thread_id, task_id] = text
    elif isinstance(tasks, SqliteTasks):
        row = (thread_id, task_id, run_id, 1.0, text)
        await tasks.store.transaction(lambda db: db.execute("INSERT OR REPLACE INTO tasks VALUES (?, ?, ?, ?, ?)", row))
    else:
        assert isinstance(tasks, RedisTasks)
        with tasks.store.reachable():
            await tasks.store.client.hset(tasks_key(tasks.store.keys, thread_id), {escape(task_id): text})


BAD_RECORDS = {
    "not JSON": "{oops",
    "not an object": "[]",
    "no design": encode_handle(handle("x")).replace('"design":"2026-07-28",', ""),
    "an unknown design": encode_handle(handle("x")).replace("2026-07-28", "1999-01-01"),
    "a task id that is a number": encode_handle(handle("x")).replace('"task_id":"x"', '"task_id":7'),
    "arguments that are text": encode_handle(attrs.evolve(handle("x"), arguments={})).replace("{}", '"x"'),
    "a deadline past any float": encode_handle(handle("x")).replace("3700.0", "1e400"),
    "a poll interval that is text": encode_handle(handle("x")).replace('"poll_interval":0.5', '"poll_interval":"1"'),
}


@pytest.mark.parametrize("bad", BAD_RECORDS)
async def test_a_record_that_does_not_read_back_raises_a_store_error_naming_thread_and_task(
    store: ConversationStore, bad: str
) -> None:
    tasks = tasks_of(store)
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "a", [])
        await write_raw(store, "t1", "task-x", "r1", BAD_RECORDS[bad])
        for read in (tasks.for_thread("t1"), tasks.for_run("r1")):
            with pytest.raises(CorruptTaskRecord) as raised:
                await read
            assert isinstance(raised.value, StoreError)
            assert (raised.value.thread_id, raised.value.task_id) == ("t1", "task-x")
            assert "'task-x'" in str(raised.value)
            assert "'t1'" in str(raised.value)
        assert await tasks.remove("t1", "task-x")  # set aside, the thread's tasks read again
        assert await tasks.for_thread("t1") == []


async def test_a_lease_taken_leaves_a_run_whose_record_is_unreadable_to_its_taking_up(store: ConversationStore) -> None:
    leases = store.leases()
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.start_run("t1", "r1", "a", [])
        await write_raw(store, "t1", "task-x", "r1", "{oops")
        taken = await leases.take("t1", "sweeper", 30, also_close="r1")
        assert taken.taken
        assert taken.closed == ()
