"""The store calls a run's steps share, the contract over every backend (memory, SQLite in tmp_path, a real
redis-server): a run takes its thread's lease and starts in one step (``take_and_start``), its close-out
releases the lease with its write (``append_last_turn``), each all or nothing; each backend's own and the
protocol's base implementations (what a store of one's own inherits: two calls each) keep the same contract."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.store.conftest import Clock
from tests.store.test_leases import SHORT, let_expire
from yao_actors.errors import RunClosed, RunIdTaken, SeqConflict, UnknownRun, UnknownThread
from yao_actors.events import stored_events
from yao_actors.specs import StoreSpec
from yao_actors.store import ConversationStore, RunFinish, RunStart, RunStatus, Taken, open_store

GUARD = 20.0
"""Seconds any one test may take with real I/O before it fails instead of hanging."""

QUESTION = {"role": "user", "content": "北京天气?"}
ANSWER = {"role": "assistant", "content": "晴"}
FINISHED = RunFinish(RunStatus.FINISHED, "answered")


def event(seq: int, kind: str = "TEXT_MESSAGE_CONTENT") -> dict[str, Any]:
    return {"type": kind, "runId": "r1", "seq": seq}


async def started(store: ConversationStore, token: str = "p:r1") -> None:
    """Thread ``t1`` with run ``r1`` running on it under lease ``token``, one event logged."""
    await store.open_thread("t1", None)
    assert (await store.leases().take("t1", token, 30)).taken
    await store.start_run("t1", "r1", "a", [QUESTION])
    await store.append_turn("t1", "r1", [], stored_events([event(1, "RUN_STARTED")]))


@attrs.frozen
class BasePaths:
    """A store's fast paths as the protocol's base implementations make them (what a store of one's own that
    overrides neither inherits): the lease, then the start; the close-out, then the release."""

    store: ConversationStore

    async def take_and_start(self, thread_id: str, token: str, ttl: float, start: RunStart) -> Taken:
        return await ConversationStore.take_and_start(self.store, thread_id, token, ttl, start)

    async def append_last_turn(self, *args: Any, **kwargs: Any) -> Sequence[int] | None:
        return await ConversationStore.append_last_turn(self.store, *args, **kwargs)


@pytest.fixture(params=["own", "base"])
def fast(request: pytest.FixtureRequest, store: ConversationStore) -> ConversationStore | BasePaths:
    """The store's own fast paths, or the base ones on it."""
    return store if request.param == "own" else BasePaths(store)


def start(run_id: str = "r1", expect: int | None = 0) -> RunStart:
    return RunStart(run_id, "a", [QUESTION], expect)


async def test_take_and_start_takes_the_lease_and_starts_the_run_in_one_step(
    store: ConversationStore, fast: ConversationStore | BasePaths
) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        taken = await fast.take_and_start("t1", "p:r1", 30, start())
        assert (taken.taken, taken.started, taken.closed) == (True, True, ())
        run = await store.get_run("r1")
        assert run is not None
        assert (run.status, run.thread_id, run.assistant, run.owner) == (RunStatus.RUNNING, "t1", "a", store.owner)
        assert [r.run_id for r in await store.list_runs("t1")] == ["r1"]
        assert await store.load_history("t1") == [QUESTION]
        assert not (await store.leases().take("t1", "q:r2", 30)).taken  # held
        assert await store.leases().renew("t1", "p:r1", 30)
        await store.append_turn("t1", "r1", [ANSWER], stored_events([event(1, "RUN_FINISHED")]), finish=FINISHED)
        assert await store.load_history("t1") == [QUESTION, ANSWER]


async def test_take_and_start_leased_elsewhere_starts_nothing(
    store: ConversationStore, fast: ConversationStore | BasePaths
) -> None:
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        assert (await store.leases().take("t1", "other", 30)).taken
        taken = await fast.take_and_start("t1", "p:r1", 30, start())
        assert (taken.taken, taken.started) == (False, False)
        assert await store.get_run("r1") is None
        assert await store.list_runs("t1") == []
        assert await store.load_history("t1") == []
        assert await store.leases().renew("t1", "other", 30)  # still the other's


async def test_take_and_start_of_an_unopened_thread_or_a_stored_run_writes_nothing(
    store: ConversationStore, fast: ConversationStore | BasePaths
) -> None:
    leases = store.leases()
    with trio.fail_after(GUARD):
        with pytest.raises(UnknownThread):
            await fast.take_and_start("nowhere", "p:r1", 30, start())
        assert (await leases.take("nowhere", "q", 30)).taken  # no lease was left behind
        assert await store.get_run("r1") is None
        await store.open_thread("t1", None)
        await store.start_run("t1", "r0", "a", [QUESTION])
        await store.finish_run("r0", status=RunStatus.FINISHED, outcome="answered")
        with pytest.raises(RunIdTaken):
            await fast.take_and_start("t1", "p:r0", 30, start("r0", 1))
        assert (await leases.take("t1", "q", 30)).taken  # no lease was left behind
        assert await store.load_history("t1") == [QUESTION]  # nor the input


@pytest.mark.parametrize("durable", ["sqlite", "redis"])
async def test_take_and_start_closes_the_run_a_dead_process_left_then_starts(
    durable: str, request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> None:
    spec = (
        StoreSpec.sqlite(tmp_path / "shared.sqlite3")
        if durable == "sqlite"
        else StoreSpec("redis", url=request.getfixturevalue("redis_server").url, prefix=f"fold-{tmp_path.name}:")
    )
    with trio.fail_after(GUARD):
        async with open_store(spec, clock=clock) as dead, open_store(spec, clock=clock) as alive:
            await dead.open_thread("t1", None)
            assert (await dead.take_and_start("t1", "dead:r0", SHORT, start("r0", 0))).started
            await dead.append_turn("t1", "r0", [], stored_events([event(1, "RUN_STARTED")]))
            taken = await alive.take_and_start("t1", "alive:r1", 30, start("r1", 1))
            assert (taken.taken, taken.started) == (False, False)  # r0 is alive still
            await let_expire(clock)  # the dead process renews nothing
            taken = await alive.take_and_start("t1", "alive:r1", 30, start("r1", 1))
            assert (taken.taken, taken.started, taken.closed, taken.stored_messages) == (True, True, ("r0",), 1)
            dead_run, run = await alive.get_run("r0"), await alive.get_run("r1")
            assert dead_run is not None
            assert run is not None
            assert (dead_run.status, run.status) == (RunStatus.INTERRUPTED, RunStatus.RUNNING)
            logged = await alive.read_events("r0")
            assert [(e["seq"], e["type"], e.get("code")) for e in logged] == [
                (1, "RUN_STARTED", None),
                (2, "RUN_ERROR", "interrupted"),
            ]
            assert await alive.load_history("t1") == [QUESTION, QUESTION]


async def test_take_and_start_behind_the_store_takes_only_the_lease(store: ConversationStore) -> None:
    """The caller's copy says the thread holds another number of messages: the lease is taken, the run is not
    started (the caller reloads the history first); with ``expect_messages`` None it starts whatever is stored."""
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        await store.append_messages("t1", [QUESTION, ANSWER])  # another process added to it
        taken = await store.take_and_start("t1", "p:r1", 30, start("r1", 0))
        assert (taken.taken, taken.started, taken.stored_messages) == (True, False, 2)
        assert await store.get_run("r1") is None
        assert await store.load_history("t1") == [QUESTION, ANSWER]
        assert await store.leases().renew("t1", "p:r1", 30)  # the lease is held
        taken = await store.take_and_start("t1", "p:r1", 30, start("r1", None))
        assert (taken.taken, taken.started) == (True, True)
        assert await store.load_history("t1") == [QUESTION, ANSWER, QUESTION]


async def test_the_close_out_releases_the_lease_in_its_write(
    store: ConversationStore, fast: ConversationStore | BasePaths
) -> None:
    with trio.fail_after(GUARD):
        await started(store)
        await fast.append_last_turn(
            "t1", "r1", [ANSWER], stored_events([event(2, "RUN_FINISHED")]), FINISHED, release="p:r1"
        )
        run = await store.get_run("r1")
        assert run is not None
        assert (run.status, run.outcome) == (RunStatus.FINISHED, "answered")
        assert await store.load_history("t1") == [QUESTION, ANSWER]
        assert [e["seq"] for e in await store.read_events("r1")] == [1, 2]
        assert not await store.leases().renew("t1", "p:r1", 30)  # given up
        assert (await store.leases().take("t1", "q:r2", 30)).taken  # free for the next run, at once


async def test_the_close_out_releases_only_a_lease_its_token_holds(
    store: ConversationStore, fast: ConversationStore | BasePaths
) -> None:
    with trio.fail_after(GUARD):
        await started(store, token="other")
        await fast.append_last_turn(
            "t1", "r1", [ANSWER], stored_events([event(2, "RUN_FINISHED")]), FINISHED, release="p:r1"
        )
        assert (await store.get_run("r1")).status is RunStatus.FINISHED  # type: ignore[union-attr]
        assert await store.leases().renew("t1", "other", 30)  # still the other's
        assert not (await store.leases().take("t1", "p:r2", 30)).taken


async def test_a_close_out_the_store_refuses_keeps_the_lease(
    store: ConversationStore, fast: ConversationStore | BasePaths
) -> None:
    """Failure in the middle: a close the store refuses writes nothing, the lease release included."""
    leases = store.leases()
    with trio.fail_after(GUARD):
        await started(store)
        with pytest.raises(SeqConflict):  # a terminal event numbered below the log's last
            await fast.append_last_turn(
                "t1", "r1", [ANSWER], stored_events([event(1, "RUN_FINISHED")]), FINISHED, release="p:r1"
            )
        await store.open_thread("t2", None)
        with pytest.raises(UnknownRun):  # the run is not on this thread
            await fast.append_last_turn(
                "t2", "r1", [], stored_events([event(2, "RUN_FINISHED")]), FINISHED, release="p:r1"
            )
        assert (await store.get_run("r1")).status is RunStatus.RUNNING  # type: ignore[union-attr]
        assert await store.load_history("t1") == [QUESTION]
        assert await leases.renew("t1", "p:r1", 30)  # still held
        assert not (await leases.take("t1", "q:r2", 30)).taken
        # Closed elsewhere (another process took it for dead): refused, and the lease is not touched either.
        assert await store.finish_run("r1", status=RunStatus.INTERRUPTED, outcome="interrupted")
        with pytest.raises(RunClosed):
            await fast.append_last_turn(
                "t1", "r1", [ANSWER], stored_events([event(3, "RUN_FINISHED")]), FINISHED, release="p:r1"
            )
        assert await leases.renew("t1", "p:r1", 30)
