"""A Redis outage longer than the thread leases, with a real ``redis-server`` stopped and started again (its
append-only file keeps the data), and a second runtime sharing it whose sweep looks for dead runs meanwhile.

A run that did not need the store during the outage takes its expired lease back (nobody took it) and answers; so
does one whose writes waited through it (within their patience); a run whose store stayed away longer ends
``store_unavailable``. Either way the stored log is exactly what the run's reader saw, its
closing event included, and the stored record says the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from tests.support import check_stream, needs_redis
from tests.test_durable_runtime import config
from yao_actors.errors import RunErrorCode
from yao_actors.events import EventDict
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.specs import StoreSpec
from yao_actors.store import RunStatus
from yao_actors.tasks import PATIENCE
from yao_actors.testing.redis_server import RedisServer

LEASE_TTL = 2.0
OUTAGE = 3.0  # longer than a lease


def sleeps(count: int, seconds: float) -> FunctionModel:
    """``count`` turns of one ``sleep`` call each, then an answer."""

    def answer(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if sum(m["role"] == "tool" for m in messages) >= count:
            return "北京今天晴, 穿羽绒服"
        return Completion(tool_calls=(ToolCall("", "test__sleep", f'{{"seconds": {seconds}}}'),))

    return FunctionModel(answer)


@asynccontextmanager
async def two_runtimes(redis: RedisServer, model: FunctionModel) -> AsyncIterator[Runtime]:
    """The runtime that runs, and beside it another sharing the store (its sweep looks every ``LEASE_TTL / 2``)."""
    spec = StoreSpec("redis", url=redis.url, prefix="outage:", lease_ttl=LEASE_TTL)
    async with (
        open_runtime(config(spec), models={"m": model}) as runtime,
        open_runtime(config(spec), models={"m": model}),
    ):
        yield runtime


async def run_through_an_outage(
    runtime: Runtime, redis: RedisServer, after: float, outage: float = OUTAGE
) -> list[EventDict]:
    """Read run ``r1`` while Redis is stopped ``after`` seconds into it, for ``outage`` seconds."""
    seen: list[EventDict] = []
    async with trio.open_nursery() as nursery:

        async def stop_for_a_while() -> None:
            await trio.sleep(after)
            await trio.to_thread.run_sync(redis.stop)
            await trio.sleep(outage)
            await trio.to_thread.run_sync(redis.start)

        nursery.start_soon(stop_for_a_while)
        async with runtime.open_run("a", "北京今天适合穿什么?", thread_id="t1", run_id="r1") as stream:
            seen = [event async for event in stream]
    return seen


@needs_redis
async def test_a_run_waiting_on_its_tool_through_an_outage_longer_than_its_lease_answers(redis: RedisServer) -> None:
    with trio.fail_after(60):
        async with two_runtimes(redis, sleeps(1, OUTAGE + 2 * LEASE_TTL)) as runtime:
            seen = await run_through_an_outage(runtime, redis, after=0.5)
            stored = await runtime.store.read_events("r1")
            record = await runtime.store.get_run("r1")
    check_stream(seen)
    assert seen[-1]["type"] == "RUN_FINISHED", seen[-1]
    assert seen[-1]["result"]["outcome"] == "answered"
    assert stored == seen
    assert record is not None
    assert (record.status, record.outcome) == (RunStatus.FINISHED, "answered")


@needs_redis
async def test_a_run_writing_through_an_outage_shorter_than_its_patience_answers(redis: RedisServer) -> None:
    with trio.fail_after(60):
        async with two_runtimes(redis, sleeps(8, 0.5)) as runtime:
            seen = await run_through_an_outage(runtime, redis, after=1.2)
            stored = await runtime.store.read_events("r1")
    check_stream(seen)
    assert seen[-1]["type"] == "RUN_FINISHED", seen[-1]
    assert stored == seen


@needs_redis
async def test_a_run_that_needs_the_store_through_a_longer_outage_ends_as_its_stored_log_says(
    redis: RedisServer,
) -> None:
    with trio.fail_after(60):
        async with two_runtimes(redis, sleeps(12, 0.5)) as runtime:
            seen = await run_through_an_outage(runtime, redis, after=1.2, outage=PATIENCE + 1)
            stored = await runtime.store.read_events("r1")
            record = await runtime.store.get_run("r1")
    check_stream(seen)
    assert seen[-1]["type"] == "RUN_ERROR", seen[-1]
    # Its writes failed (store_unavailable), unless the other runtime took it for dead first (interrupted):
    # either way what its reader saw is what the store holds, and the record agrees.
    assert seen[-1]["code"] in (RunErrorCode.STORE_UNAVAILABLE, RunErrorCode.INTERRUPTED)
    assert stored == seen
    assert record is not None
    assert record.status is (RunStatus.FAILED if seen[-1]["code"] == "store_unavailable" else RunStatus.INTERRUPTED)
