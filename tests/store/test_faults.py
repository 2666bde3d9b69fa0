"""Faults of the durable stores: Redis stopped and restarted, SQLite unwritable or locked, a write failing midway."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import coredis
import pytest
import trio

from tests.store.conftest import Clock
from tests.store.sqlite_files import write_file_of_version
from tests.support import needs_redis
from yao_actors.errors import StoreUnavailable
from yao_actors.events import stored_events
from yao_actors.store import RunStatus, StoreSpec, open_sqlite_store, open_store
from yao_actors.store.leases import sweep_dead_runs
from yao_actors.store.redis import RedisStore
from yao_actors.store.sqlite.schema import MIGRATIONS
from yao_actors.testing.redis_server import RedisServer

GUARD = 20.0


@asynccontextmanager
async def redis_store_and_client(server: RedisServer, prefix: str) -> AsyncIterator[tuple[RedisStore, coredis.Redis]]:
    """A Redis store on ``server`` under ``prefix``, and a plain client to the same server to break its keys with."""
    async with (
        open_store(StoreSpec("redis", url=server.url, prefix=prefix)) as store,
        coredis.Redis.from_url(server.url, decode_responses=True) as raw,
    ):
        assert isinstance(store, RedisStore)
        yield store, raw


QUESTION = [{"role": "user", "content": "weather?"}]
TURN = [
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "3°C"},
    {"role": "assistant", "content": "cold"},
]


@needs_redis
async def test_redis_stopped_is_unavailable_and_restarted_serves_again_with_nothing_lost(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    try:
        with trio.fail_after(GUARD):
            async with open_store(StoreSpec("redis", url=server.url)) as store:
                await store.open_thread("t1", "alice")
                await store.start_run("t1", "r1", "default", QUESTION)
                await store.append_messages("t1", TURN)
                await store.finish_run("r1", status=RunStatus.FINISHED, outcome="answered")
                server.stop()
                with pytest.raises(StoreUnavailable, match=rf"Redis store at {server.url} is unreachable"):
                    await store.append_messages("t1", [{"role": "user", "content": "lost"}])
                with pytest.raises(StoreUnavailable, match="unreachable"):
                    await store.load_history("t1")
                server.start()
                assert await store.load_history("t1") == [*QUESTION, *TURN]
                run = await store.get_run("r1")
                assert run is not None
                assert run.outcome == "answered"
                await store.start_run("t1", "r2", "default", [{"role": "user", "content": "again"}])
                assert len(await store.load_history("t1")) == 5
    finally:
        server.stop()


async def test_redis_down_at_open_is_unavailable(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)  # never started: nothing listens on its port
    with trio.fail_after(GUARD), pytest.raises(StoreUnavailable, match=f"Redis store at {server.url}"):
        async with open_store(StoreSpec("redis", url=server.url)):
            pass


async def test_redis_event_logs_expire(redis_server: RedisServer) -> None:
    spec = StoreSpec("redis", url=redis_server.url, prefix="ttl:", event_ttl=1.0)
    with trio.fail_after(GUARD):
        async with open_store(spec) as store:
            await store.open_thread("t1", None)
            await store.start_run("t1", "r1", "default", [])
            await store.append_events("r1", stored_events([{"type": "CUSTOM", "name": "x", "value": 1, "seq": 1}]))
            assert len(await store.read_events("r1")) == 1
            # Redis expires the log on its own clock: there is nothing to wait on but the log itself.
            while await store.read_events("r1"):  # noqa: ASYNC110
                await trio.sleep(0.05)
            assert await store.get_run("r1") is not None


async def test_an_sqlite_path_that_cannot_be_created_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "conversations.sqlite3"
    with trio.fail_after(GUARD), pytest.raises(StoreUnavailable, match=f"SQLite store {path}"):
        async with open_store(StoreSpec.sqlite(path)):
            pass


async def test_an_sqlite_file_locked_past_busy_timeout_is_unavailable_then_serves_again(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    with trio.fail_after(GUARD):
        async with open_sqlite_store(path, busy_timeout=0.05) as store:
            await store.open_thread("t1", None)
            other = sqlite3.connect(path, isolation_level=None)
            other.execute("BEGIN EXCLUSIVE")
            with pytest.raises(StoreUnavailable, match="database is locked"):
                await store.append_messages("t1", QUESTION)
            other.execute("ROLLBACK")
            other.close()
            await store.append_messages("t1", QUESTION)
            assert await store.load_history("t1") == QUESTION


async def test_an_sqlite_write_failing_midway_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    with trio.fail_after(GUARD):
        async with open_sqlite_store(path) as store:
            await store.open_thread("t1", None)
            await store.append_messages("t1", QUESTION)
            # Another connection plants a trigger that fails the insert of the turn's last message.
            other = sqlite3.connect(path, isolation_level=None)
            other.execute(
                "CREATE TRIGGER fail_midway BEFORE INSERT ON messages WHEN NEW.message LIKE '%cold%'"
                " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
            )
            other.close()
            # Any sqlite3 error is StoreUnavailable once it leaves the store (issue 29): it never escapes a run.
            with pytest.raises(StoreUnavailable, match=f"SQLite store {path}: injected failure") as failed:
                await store.append_messages("t1", TURN)
            assert isinstance(failed.value.__cause__, sqlite3.IntegrityError)
            with pytest.raises(StoreUnavailable, match="injected failure") as failed:
                await store.start_run("t1", "r1", "default", TURN)
            assert isinstance(failed.value.__cause__, sqlite3.IntegrityError)
            assert await store.load_history("t1") == QUESTION
            assert await store.get_run("r1") is None
            await store.append_messages("t1", TURN[:2])
            assert await store.load_history("t1") == [*QUESTION, *TURN[:2]]


async def test_sqlite_file_is_wal_and_versioned(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "conversations.sqlite3"
    with trio.fail_after(GUARD):
        async with open_store(StoreSpec.sqlite(path), clock=clock):
            pass
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
    db.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS) + 1,))
    db.commit()
    db.close()
    with trio.fail_after(GUARD), pytest.raises(StoreUnavailable, match="newer than this program"):
        async with open_store(StoreSpec.sqlite(path)):
            pass


async def test_an_sqlite_file_of_schema_version_1_is_upgraded_and_keeps_its_threads(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    write_file_of_version(  # the file as the first release of the store wrote it
        path,
        1,
        "INSERT INTO threads VALUES ('t1', 'alice', 1.0, 1.0)",
        ("INSERT INTO messages (thread_id, message) VALUES ('t1', ?)", ('{"role":"user","content":"北京?"}',)),
    )
    approvals = [{"interruptId": "approval-c1", "call": {"id": "c1", "name": "w", "arguments": "{}"}, "expiresAt": 9.0}]
    with trio.fail_after(GUARD):
        async with open_store(StoreSpec.sqlite(path)) as store:
            assert await store.load_history("t1") == [{"role": "user", "content": "北京?"}]
            assert await store.load_approvals("t1") == []
            await store.save_approvals("t1", approvals)
        async with open_store(StoreSpec.sqlite(path)) as store:
            assert await store.load_approvals("t1") == approvals
            assert await store.forget_thread("t1")
            assert await store.load_approvals("t1") == []
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]
    assert db.execute("SELECT COUNT(*) FROM approvals").fetchone() == (0,)
    db.close()


@pytest.mark.parametrize("leases_made_on_first_use", [False, True])
async def test_an_sqlite_file_of_schema_version_2_gets_its_lease_table_as_version_3(
    tmp_path: Path, leases_made_on_first_use: bool
) -> None:
    """The leases table was made on first use, outside the versions, by 0.1: a version 2 file may have it (with a
    lease in it) or not; either way it opens at version 3 and its leases work."""
    path = tmp_path / "conversations.sqlite3"
    first_use_leases = (
        "CREATE TABLE leases (thread_id TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at REAL NOT NULL)",
        "INSERT INTO leases VALUES ('t1', 'old:r1', 1e12)",
    )
    write_file_of_version(path, 2, *(first_use_leases if leases_made_on_first_use else ()))
    with trio.fail_after(GUARD):
        async with open_store(StoreSpec.sqlite(path)) as store:
            leases = store.leases()
            assert leases is store.leases()
            assert (await leases.take("t1", "new:r2", 60)).taken is not leases_made_on_first_use
            assert (await leases.take("t2", "new:r3", 60)).taken
    db = sqlite3.connect(path)
    assert db.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]  # 3, and later ones
    db.close()


async def test_every_sqlite_error_leaves_the_store_as_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    with trio.fail_after(GUARD):
        async with open_sqlite_store(path) as store:
            with pytest.raises(StoreUnavailable, match="NOT NULL") as failed:
                await store.access.transaction(
                    lambda db: db.execute("INSERT INTO threads VALUES ('t', NULL, NULL, NULL)")
                )
            assert isinstance(failed.value.__cause__, sqlite3.IntegrityError)
            with pytest.raises(StoreUnavailable, match="binding") as failed:
                await store.access.query("SELECT ?", ())
            assert isinstance(failed.value.__cause__, sqlite3.ProgrammingError)
            await store.open_thread("t1", None)  # and it serves on
            assert await store.get_thread("t1") is not None


@needs_redis
async def test_a_redis_error_answer_leaves_the_store_as_store_unavailable(redis_server: RedisServer) -> None:
    with trio.fail_after(GUARD):
        async with redis_store_and_client(redis_server, "wrongtype:") as (store, raw):
            await store.open_thread("t1", "alice")
            await raw.set(store.keys.messages("t1"), "not a list")
            with pytest.raises(StoreUnavailable, match=r"answered with an error \(WrongTypeError\)"):
                await store.start_run("t1", "r1", "default", QUESTION)
            with pytest.raises(StoreUnavailable, match="WrongTypeError"):
                await store.load_history("t1")
            leases = store.leases()
            await raw.hset(store.keys.lease("t1"), {"not": "a lease"})
            for call in (
                leases.take("t1", "token", 30),
                leases.renew("t1", "token", 30),
                leases.release("t1", "token"),
            ):
                with pytest.raises(StoreUnavailable, match="WrongTypeError"):
                    await call
            await store.open_thread("t2", "alice")  # and it serves on
            await store.start_run("t2", "r2", "default", QUESTION)
            assert await store.load_history("t2") == QUESTION


@needs_redis
async def test_a_sweep_goes_past_a_thread_the_store_fails_on(redis_server: RedisServer) -> None:
    with trio.fail_after(GUARD):
        async with redis_store_and_client(redis_server, "sweep-past:") as (store, raw):
            for thread_id, run_id in (("t-poisoned", "a-poisoned"), ("t-ok", "b-ok")):
                await store.open_thread(thread_id, None)
                await store.start_run(thread_id, run_id, "default", QUESTION)  # no lease: its process is gone
            await raw.delete([store.keys.thread_runs("t-poisoned")])
            await raw.set(store.keys.thread_runs("t-poisoned"), "not a list")
            leases = store.leases()
            assert await sweep_dead_runs(leases, "sweeper", 30, owner="another process") == ["b-ok"]
            assert (await store.get_run("a-poisoned")).status is RunStatus.RUNNING  # type: ignore[union-attr]
            assert (await store.get_run("b-ok")).status is RunStatus.INTERRUPTED  # type: ignore[union-attr]


async def test_an_exclusive_sqlite_store_maps_no_shm_and_refuses_other_openers(tmp_path: Path) -> None:
    """Issue 29: the WAL index of an exclusive store is in the process's memory (no -shm file that could be made
    unwritable under it); another opener is refused, and once it is closed the file is anyone's again."""
    path = tmp_path / "conversations.sqlite3"
    with trio.fail_after(GUARD):
        async with open_sqlite_store(path, exclusive=True) as store:
            await store.open_thread("t1", None)
            await store.append_messages("t1", QUESTION)
            assert not (tmp_path / "conversations.sqlite3-shm").exists()
            with pytest.raises(StoreUnavailable, match="database is locked"):
                async with open_sqlite_store(path, busy_timeout=0.05):
                    pass
        async with open_sqlite_store(path) as shared, open_sqlite_store(path) as other:
            assert (tmp_path / "conversations.sqlite3-shm").exists()
            assert await shared.load_history("t1") == await other.load_history("t1") == QUESTION


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("suffix", ["", "-wal"])
async def test_an_sqlite_file_moved_or_deleted_under_the_store_refuses_calls(
    tmp_path: Path, exclusive: bool, suffix: str
) -> None:
    """Issue 29: SQLite would go on with the unlinked inode, and what it acknowledged would be gone at the next
    start. The store refuses its calls (and says why to readiness) until the path names its file again."""
    path = tmp_path / "conversations.sqlite3"
    moved = tmp_path / "elsewhere"
    with trio.fail_after(GUARD):
        async with open_sqlite_store(path, exclusive=exclusive) as store:
            await store.open_thread("t1", None)
            assert store.problem() is None
            (tmp_path / f"conversations.sqlite3{suffix}").rename(moved)
            problem = store.problem()
            assert problem == (
                f"{path}{suffix} was deleted while the store had it open: what the store writes now would be lost "
                "at the next start, so it takes no more writes (put the file back, or restart the service)"
            )
            with pytest.raises(StoreUnavailable, match=f"SQLite store {path}: {path}{suffix} was deleted"):
                await store.append_messages("t1", QUESTION)
            with pytest.raises(StoreUnavailable, match="was deleted"):
                await store.load_history("t1")
            (tmp_path / "other").write_bytes(b"")
            (tmp_path / "other").rename(tmp_path / f"conversations.sqlite3{suffix}")
            assert "replaced by another file" in (store.problem() or "")
            moved.rename(tmp_path / f"conversations.sqlite3{suffix}")  # the store's own file back
            assert store.problem() is None
            await store.append_messages("t1", QUESTION)
        async with open_sqlite_store(path) as reopened:
            assert await reopened.load_history("t1") == QUESTION


async def test_only_an_sqlite_store_reports_a_problem_without_a_call() -> None:
    async with open_store(StoreSpec("memory")) as store:
        assert store.problem() is None
