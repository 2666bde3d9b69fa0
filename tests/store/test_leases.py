"""Thread leases, the contract over every backend (memory, SQLite in tmp_path, a real redis-server), and how
runs use them (two runtimes sharing one store stand for two worker processes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.store.conftest import Clock
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation.durable.leasing import LeasePolicy
from yao_actors.errors import RunErrorCode
from yao_actors.events import Outcome, parse_event, stored_events
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.specs import StoreSpec
from yao_actors.store import ConversationStore, MemoryLeases, MemoryStore, RunStatus, open_store
from yao_actors.store.leases import sweep_dead_runs
from yao_actors.testing.servers import build_test_server

GUARD = 20.0
"""Seconds any one test may take with real I/O before it fails instead of hanging."""

SHORT = 0.05
"""A lease ttl that has passed after :func:`let_expire` (real time for Redis, the test clock for SQLite)."""

HELD = 1.0
"""A lease ttl that is still running a few store calls after the take, on a loaded machine too (real time for
Redis), and has passed after ``let_expire(clock, HELD)``."""


@pytest.fixture(params=["sqlite", "redis"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSpec:
    """A store that two opens share, as two worker processes would: one SQLite file, or one redis-server under a
    prefix of this test's own."""
    if request.param == "sqlite":
        return StoreSpec.sqlite(tmp_path / "shared.sqlite3")
    server = request.getfixturevalue("redis_server")
    return StoreSpec("redis", url=server.url, prefix=f"lease-{tmp_path.name}:")


async def let_expire(clock: Clock, ttl: float = SHORT) -> None:
    """Let a lease of ``ttl`` seconds taken before expire."""
    clock.advance(max(1, 2 * ttl))  # SQLite's expiry is the store's clock
    await trio.sleep(ttl + 0.1)  # Redis' is its own; the memory backend's is Trio's


async def test_a_lease_is_held_renewed_and_released_by_its_token_only(store: ConversationStore) -> None:
    leases = store.leases()
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        assert (await leases.take("t1", "a", 30)).taken
        assert (await leases.take("t1", "a", 30)).taken  # its holder extends it
        assert not (await leases.take("t1", "b", 30)).taken
        assert await leases.renew("t1", "a", 30)
        assert not await leases.renew("t1", "b", 30)
        await leases.release("t1", "b")  # not b's: nothing happens
        assert not (await leases.take("t1", "b", 30)).taken
        assert (await leases.take("t2", "b", 30)).taken  # another thread is another lease
        await leases.release("t1", "a")
        assert (await leases.take("t1", "b", 30)).taken
        assert not await leases.renew("t1", "a", 30)


async def test_an_expired_lease_can_be_taken_by_another(store: ConversationStore, clock: Clock) -> None:
    leases = store.leases()
    with trio.fail_after(GUARD):
        await store.open_thread("t1", None)
        assert (await leases.take("t1", "a", SHORT)).taken
        await let_expire(clock)
        assert (await leases.take("t1", "b", 30)).taken
        assert not await leases.renew("t1", "a", 30)


async def test_taking_the_lease_of_a_dead_run_closes_it_interrupted(durable: StoreSpec, clock: Clock) -> None:
    with trio.fail_after(GUARD):
        async with open_store(durable, clock=clock) as dead, open_store(durable, clock=clock) as alive:
            await dead.open_thread("t1", "alice")
            await dead.start_run("t1", "done", "a", [{"role": "user", "content": "first"}])
            await dead.finish_run("done", status=RunStatus.FINISHED, outcome="answered")
            # Long enough to be held still at the check below (a 50 ms one could pass first, on Redis' own clock).
            assert (await dead.leases().take("t1", "dead:r1", HELD)).taken
            await dead.start_run("t1", "r1", "a", [{"role": "user", "content": "北京天气?"}])
            await dead.append_events(
                "r1", stored_events([{"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "seq": 1}])
            )
            leases = alive.leases()
            assert not (await leases.take("t1", "alive:r2", 30)).taken  # still leased: r1 is alive
            assert (await alive.get_run("r1")).status is RunStatus.RUNNING  # type: ignore[union-attr]
            await let_expire(clock, HELD)  # the dead process renews nothing
            taken = await leases.take("t1", "alive:r2", 30)
            assert (taken.taken, taken.closed, taken.stored_messages) == (True, ("r1",), 2)
            run = await alive.get_run("r1")
            assert run is not None
            assert (run.status, run.outcome) == (RunStatus.INTERRUPTED, "interrupted")
            logged = await alive.read_events("r1")
            assert [e["seq"] for e in logged] == [1, 2]
            parse_event(logged[-1])
            assert (logged[-1]["type"], logged[-1]["code"], logged[-1]["runId"]) == ("RUN_ERROR", "interrupted", "r1")
            assert (await alive.get_run("done")).outcome == "answered"  # type: ignore[union-attr]
            assert await alive.load_history("t1") == [
                {"role": "user", "content": "first"},
                {"role": "user", "content": "北京天气?"},
            ]
            assert not await dead.finish_run("r1", status=RunStatus.FINISHED, outcome="answered")  # too late


async def test_a_sweep_closes_only_the_runs_whose_lease_expired(durable: StoreSpec, clock: Clock) -> None:
    with trio.fail_after(GUARD):
        async with open_store(durable, clock=clock) as store:
            leases = store.leases()
            for thread in ("t-dead", "t-alive", "t-none"):
                await store.open_thread(thread, None)
            # Runs take their lease first; "r-none" stands for a run whose lease is long gone.
            assert (await leases.take("t-dead", "x:r-dead", SHORT)).taken
            assert (await leases.take("t-alive", "y:r-alive", 30)).taken
            for thread, run in (("t-dead", "r-dead"), ("t-alive", "r-alive"), ("t-none", "r-none")):
                await store.start_run(thread, run, "a", [{"role": "user", "content": run}])
            await let_expire(clock)
            # The sweep's candidates: running, with the thread's lease free (r-alive's is held); a sweep of the
            # process that started them never sees them (it is alive, and so are they).
            assert await leases.unleased_running_runs(store.owner) == []
            assert await sweep_dead_runs(leases, "sweeper", 30, owner=store.owner) == []
            other = "another process"
            assert sorted(await leases.unleased_running_runs(other)) == [("r-dead", "t-dead"), ("r-none", "t-none")]
            assert sorted(await sweep_dead_runs(leases, "sweeper", 30, owner=other)) == ["r-dead", "r-none"]
            assert await leases.unleased_running_runs(other) == []
            assert (await store.get_run("r-alive")).status is RunStatus.RUNNING  # type: ignore[union-attr]
            assert await sweep_dead_runs(leases, "sweeper", 30, owner=other) == []
            assert (await leases.take("t-dead", "z", 30)).taken  # the sweep gave the lease back


async def test_a_periodic_sweep_closes_a_run_only_once_two_looks_found_its_lease_free(
    durable: StoreSpec, clock: Clock
) -> None:
    with trio.fail_after(GUARD):
        async with open_store(durable, clock=clock) as store, open_store(durable, clock=clock) as sweeping:
            leases, theirs = store.leases(), sweeping.leases()
            await store.open_thread("t1", None)
            assert (await leases.take("t1", f"{store.owner}:r1", SHORT)).taken
            await store.start_run("t1", "r1", "a", [{"role": "user", "content": "北京?"}])
            await let_expire(clock)  # its process could not renew it (its store was out of reach)
            suspects: set[str] = set()
            assert await sweep_dead_runs(theirs, "sweeper", 30, owner=sweeping.owner, suspects=suspects) == []
            assert suspects == {"r1"}
            # Its process takes the lease back before the next look: the run lives on.
            assert await leases.reclaim("t1", f"{store.owner}:r1", 30, "r1")
            assert await sweep_dead_runs(theirs, "sweeper", 30, owner=sweeping.owner, suspects=suspects) == []
            assert suspects == set()
            assert (await store.get_run("r1")).status is RunStatus.RUNNING  # type: ignore[union-attr]
            # Dead for good: found free at two looks in a row, it is closed.
            await leases.release("t1", f"{store.owner}:r1")
            assert await sweep_dead_runs(theirs, "sweeper", 30, owner=sweeping.owner, suspects=suspects) == []
            assert await sweep_dead_runs(theirs, "sweeper", 30, owner=sweeping.owner, suspects=suspects) == ["r1"]
            assert (await store.get_run("r1")).status is RunStatus.INTERRUPTED  # type: ignore[union-attr]


async def test_an_expired_lease_nobody_took_is_taken_back_but_never_from_another_or_for_a_closed_run(
    spec: StoreSpec, clock: Clock
) -> None:
    with trio.fail_after(GUARD):
        async with open_store(spec, clock=clock) as store:
            leases = store.leases()
            await store.open_thread("t1", None)
            assert (await leases.take("t1", "me:r1", SHORT)).taken
            await store.start_run("t1", "r1", "a", [])
            assert await leases.reclaim("t1", "me:r1", SHORT, "r1")  # held by itself: kept
            await let_expire(clock)
            assert not await leases.renew("t1", "me:r1", 30) or spec.type != "redis"  # Redis forgets an expired key
            assert await leases.reclaim("t1", "me:r1", SHORT, "r1")  # free, the run still running: taken back
            await let_expire(clock)
            assert (await leases.take("t1", "other:r2", 30, also_close="r1")).taken  # another took it
            assert not await leases.reclaim("t1", "me:r1", 30, "r1")
            await leases.release("t1", "other:r2")
            await store.finish_run("r1", status=RunStatus.INTERRUPTED, outcome="interrupted")  # (taken for dead)
            assert not await leases.reclaim("t1", "me:r1", 30, "r1")  # free now, but r1 was closed
            assert (await leases.take("t1", "third:r3", 30)).taken  # and nothing was taken by the refusal


# ---------------------------------------------------------------- runs holding leases (two runtimes, one store)


def _config(store: StoreSpec | None = None) -> Config:
    servers = {"test": ServerSpec("test", InMemoryTransport(build_test_server()))}
    return Config(servers=servers, assistants={"a": AssistantSpec("a", "m", (), (ServerRef("test"),))}, store=store)


async def test_a_run_waits_for_a_thread_leased_elsewhere_and_then_ends_thread_busy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryStore()
    shared = MemoryLeases(store)  # two processes sharing one store: one lease table
    release = trio.Event()

    async def slow(messages: Sequence[dict[str, Any]], tools: object) -> str:
        await release.wait()
        return "done"

    async def quick(messages: Sequence[dict[str, Any]], tools: object) -> str:
        return f"{len(messages)} messages"

    first = LeasePolicy(shared, "first", ttl=3, wait=10)
    second = LeasePolicy(shared, "second", ttl=3, wait=10)
    with trio.fail_after(300):
        async with (
            open_runtime(_config(), models={"m": FunctionModel(slow)}, store=store) as a,
            open_runtime(_config(), models={"m": FunctionModel(quick)}, store=store) as b,
        ):
            a.conversations._threads._leases = first  # the policy its thread actors are started with
            b.conversations._threads._leases = second
            async with trio.open_nursery() as nursery:
                results: dict[str, Any] = {}

                async def run_first() -> None:
                    results["first"] = await a.run("a", "慢慢回答", thread_id="t")

                nursery.start_soon(run_first)
                await trio.testing.wait_all_tasks_blocked()
                start = trio.current_time()
                busy = await b.run("a", "我也要", thread_id="t")
                waited = trio.current_time() - start
                # The first run goes on far past its lease's ttl: its renewals keep the thread.
                await trio.sleep(20)
                assert not (await shared.take("t", "third", 3)).taken
                release.set()
            after = await b.run("a", "现在呢?", thread_id="t")
    assert busy.outcome is Outcome.ERROR
    assert busy.code is RunErrorCode.THREAD_BUSY
    assert "lease_wait" in (busy.error or "")
    assert waited >= 10
    assert [e["type"] for e in busy.events] == ["RUN_STARTED", "RUN_ERROR"]
    assert results["first"].text == "done"
    assert after.outcome is Outcome.ANSWERED


async def test_a_run_reloads_the_history_another_process_added_to(tmp_path: Path) -> None:
    spec = StoreSpec.sqlite(tmp_path / "shared.sqlite3")

    def answer(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "user" and "天气" in messages[-1]["content"]:
            return Completion(tool_calls=(ToolCall("c1", "test__echo", '{"text": "北京 3°C"}'),))
        return f"{len(messages)}: " + " / ".join(str(m.get("content")) for m in messages if m["role"] == "user")

    model = FunctionModel(answer)
    with trio.fail_after(GUARD):
        async with (
            open_runtime(_config(spec), models={"m": model}) as a,
            open_runtime(_config(spec), models={"m": model}) as b,
        ):
            one = await a.run("a", "北京天气?", thread_id="t")
            two = await b.run("a", "第二", thread_id="t")
            three = await a.run("a", "第三", thread_id="t")  # a's copy of the thread is behind: reloaded
            stored = await a.history("t")
    assert one.outcome is two.outcome is three.outcome is Outcome.ANSWERED
    assert two.text == "5: 北京天气? / 第二"
    assert three.text == "7: 北京天气? / 第二 / 第三"
    roles = [m["role"] for m in stored.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "user", "assistant"]
    assert [r.status for r in stored.runs] == [RunStatus.FINISHED] * 3
