"""The run's journal writes a queued turn when the process is idle (the run waits on its tool), within
``IDLE_WAIT`` seconds when it never is (and then at once for ``BUSY_HOLD`` seconds), and at once at the
close-out; a closed writer that waits to be woken returns without being cancelled."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

from yao_actors.conversation.durable.journal import RunJournal
from yao_actors.conversation.durable.pacing import BUSY_HOLD, IDLE_WAIT
from yao_actors.conversation.streaming.outlet import RunOutlet
from yao_actors.history_budget import message_bytes
from yao_actors.store import MemoryStore

QUESTION = {"role": "user", "content": "北京今天适合穿什么?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "25度"}


@attrs.define(eq=False)
class NotingStore(MemoryStore):
    """A memory store that notes each ``append_turn`` in ``log`` (shared with the test), with the time."""

    log: list[tuple[str, float]] = attrs.field(factory=list)

    @property
    def writes_in_step(self) -> bool:
        return False  # its append_turn is what the tests watch: the run's turns go through it, paced

    async def append_turn(
        self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[Any], **finish: Any
    ) -> None:
        await super().append_turn(thread_id, run_id, messages, events, **finish)
        self.log.append(("written", trio.current_time()))


async def started_journal() -> tuple[NotingStore, RunJournal]:
    store = NotingStore()
    await store.open_thread("t", None)
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=False)
    await journal.start("a", [QUESTION])
    return store, journal


@asynccontextmanager
async def journal_served() -> AsyncIterator[tuple[NotingStore, RunJournal, trio.Nursery]]:
    """A started journal, its writer serving in the nursery it yields, over its :class:`NotingStore`."""
    store, journal = await started_journal()
    async with trio.open_nursery() as nursery:
        await nursery.start(journal.serve)
        yield store, journal, nursery


async def busy_until(done: Callable[[], bool], clock: trio.testing.MockClock) -> float:
    """Keep the process busy, never idle (time passes only with the work), until ``done()``; how long that took."""
    start = trio.current_time()
    while not done():
        clock.jump(IDLE_WAIT / 10)
        await trio.lowlevel.checkpoint()
    return trio.current_time() - start


async def test_a_queued_turn_is_written_once_every_task_waits(autojump_clock: trio.testing.MockClock) -> None:
    async with journal_served() as (store, journal, nursery):
        journal.turn([CALL, RESULT])
        for step in range(20):  # the run goes on to its next request: busy, never idle
            store.log.append((f"busy {step}", trio.current_time()))
            await trio.lowlevel.checkpoint()
        store.log.append(("waiting", trio.current_time()))
        await trio.sleep(1)  # the run waits on its tool: the process is idle, the turn is written now
        nursery.cancel_scope.cancel()
    assert [what for what, _ in store.log[-2:]] == ["waiting", "written"]
    assert store.log[-1][1] == store.log[-2][1]  # as soon as the process was idle, not a moment later
    assert await store.load_history("t") == [QUESTION, CALL, RESULT]


async def test_a_busy_process_has_its_turn_written_within_the_idle_wait(autojump_clock: trio.testing.MockClock) -> None:
    async with journal_served() as (store, journal, nursery):
        journal.turn([CALL, RESULT])
        waited = await busy_until(lambda: bool(store.log), autojump_clock)
        nursery.cancel_scope.cancel()
    assert IDLE_WAIT <= waited < 2 * IDLE_WAIT  # (the write itself takes a few steps)
    assert await store.load_history("t") == [QUESTION, CALL, RESULT]


async def busy_until_written(store: NotingStore, clock: trio.testing.MockClock) -> float:
    """Keep the process busy until the store has one more write; how long that took."""
    writes = len(store.log)
    return await busy_until(lambda: len(store.log) > writes, clock)


async def test_once_a_wait_for_idle_timed_out_the_writes_skip_it_for_a_while(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with journal_served() as (store, journal, nursery):
        journal.turn([CALL])
        assert await busy_until_written(store, autojump_clock) >= IDLE_WAIT  # waited for idle, in vain
        journal.turn([RESULT])
        assert await busy_until_written(store, autojump_clock) < IDLE_WAIT  # busy: written at once
        autojump_clock.jump(BUSY_HOLD)
        journal.turn([CALL])
        assert await busy_until_written(store, autojump_clock) >= IDLE_WAIT  # waits for idle again
        nursery.cancel_scope.cancel()
    assert await store.load_history("t") == [QUESTION, CALL, RESULT, CALL]


async def test_a_closed_writer_returns_without_a_cancellation(autojump_clock: trio.testing.MockClock) -> None:
    async with journal_served() as (store, journal, _):
        journal.turn([CALL, RESULT])
        await trio.sleep(1)  # idle: written; the writer waits to be woken again
        await journal.close()
    # The writer's own scope caught nothing: it returned (a cancelled one would have caught its Cancelled).
    assert not journal._serving.cancel_called
    assert [what for what, _ in store.log] == ["written"]


async def test_a_closed_parked_writer_ends_at_once_on_a_busy_process(autojump_clock: trio.testing.MockClock) -> None:
    _store, journal = await started_journal()
    ended = trio.Event()

    async def writer() -> None:
        await journal.serve()
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        await trio.sleep(1)  # the writer waits to be woken
        await journal.close()
        took = await busy_until(ended.is_set, autojump_clock)
    assert took < IDLE_WAIT  # it did not wait for an idle moment first
    assert not journal._serving.cancel_called


async def test_a_writer_closed_while_waiting_for_idle_is_cancelled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with journal_served() as (store, journal, _):
        journal.turn([CALL, RESULT])
        await trio.lowlevel.checkpoint()  # the writer is waiting for the process to be idle
        await journal.flush()  # the close-out writes what is queued itself
        await journal.close()
    assert journal._serving.cancelled_caught  # its idle wait was cancelled, not waited out
    assert [what for what, _ in store.log] == ["written"]


async def test_the_close_out_writes_what_is_queued_without_waiting(autojump_clock: trio.testing.MockClock) -> None:
    async with journal_served() as (store, journal, nursery):
        journal.turn([CALL])
        await trio.lowlevel.checkpoint()  # the writer is waiting for the process to be idle
        journal.turn([RESULT])
        start = trio.current_time()
        await journal.flush()
        assert [what for what, _ in store.log] == ["written"]  # one write, both turns, at once
        assert store.log[0][1] == start
        assert journal.stored == (QUESTION, CALL, RESULT)
        await trio.sleep(1)  # idle: the writer wakes and finds nothing more to write
        nursery.cancel_scope.cancel()
    assert len(store.log) == 1
    assert await store.load_history("t") == [QUESTION, CALL, RESULT]


@attrs.define(eq=False)
class MeasuringStore(MemoryStore):
    """A memory store whose ``append_turn`` reports made-up sizes, or none (``None``: as a durable store)."""

    reported: list[int] | None = None

    @property
    def writes_in_step(self) -> bool:
        return False  # its append_turn is what the test watches: the run's turns go through it

    async def append_turn(
        self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[Any], **finish: Any
    ) -> list[int] | None:
        await super().append_turn(thread_id, run_id, messages, events, **finish)
        return self.reported


async def test_the_journal_keeps_the_sizes_its_store_measured_or_measures_itself() -> None:
    for reported, expected in (([7, 8], [7, 8]), (None, [message_bytes(CALL), message_bytes(RESULT)])):
        store = MeasuringStore(reported=reported)
        await store.open_thread("t", None)
        journal = RunJournal(store, "t", "r", RunOutlet(), durable=False)
        await journal.start("a", [QUESTION])
        journal.turn([CALL, RESULT])
        await journal.flush()
        assert journal.stored == (QUESTION, CALL, RESULT)
        assert journal.sizes == (message_bytes(QUESTION), *expected)  # the store's measures when it gave them
