"""Durable before visible: with a store that outlives the process, a run's reader gets an event only once it is in
the run's stored log, so the stored log and what any client saw never disagree — whatever the store does.

The store here is a memory store behind a wrapper that is not a ``MemoryStore`` (so the runtime treats it as
durable) and can fail on demand: out of reach for a while, a reply lost after the write, or the run closed by
"another process" (as a sweep closes a run whose lease expired).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio
import trio.testing

from tests.support import check_stream
from tests.test_durable_runtime import config
from yao_actors.conversation.durable.close_out import CLOSE_PATIENCE
from yao_actors.conversation.durable.journal import WRITE_PATIENCE
from yao_actors.conversation.durable.replay import stored_run_stream
from yao_actors.errors import RunErrorCode, StoreUnavailable
from yao_actors.events import EventDict, Outcome, stored_events
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.store import (
    ConversationStore,
    EncodedEvent,
    MemoryLeases,
    MemoryStore,
    RunFinish,
    RunRecord,
    RunStatus,
)
from yao_actors.store.codec import encoded_interruption


@attrs.define(eq=False)
class FaultyDurableStore:
    """A memory store seen as durable, whose ``append_turn`` can fail as a real one does."""

    inner: MemoryStore = attrs.field(factory=MemoryStore)
    down_until: float = -1.0
    """``trio.current_time()`` until which every write fails with ``StoreUnavailable``."""
    lose_replies: int = 0
    """Writes that go through but whose answer is lost (``StoreUnavailable`` after the write)."""
    stored_seq: dict[str, int] = attrs.field(factory=dict)
    """The last ``seq`` stored per run: what a reader may have seen at most."""
    on_write: Any = None
    """Called (awaited) before each ``append_turn`` with its events."""
    _leases: MemoryLeases = attrs.field(init=False)

    @_leases.default
    def _own_leases(self) -> MemoryLeases:
        return MemoryLeases(self)  # its runs closed through its own interface, as a durable store's are

    @property
    def durable(self) -> bool:
        return True

    def leases(self) -> MemoryLeases:
        return self._leases

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # Its leases are its own: a run's lease and close-out go through them, as the protocol's base ones do.
    take_and_start = ConversationStore.take_and_start
    append_last_turn = ConversationStore.append_last_turn

    async def append_turn(
        self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[EncodedEvent], **finish: Any
    ) -> Any:
        if self.on_write is not None:
            await self.on_write(run_id, [json.loads(text) for _, text in events])
        if trio.current_time() < self.down_until:
            await trio.lowlevel.checkpoint()
            raise StoreUnavailable("the test's store is out of reach")
        sizes = await self.inner.append_turn(thread_id, run_id, messages, events, **finish)
        if events:
            self.stored_seq[run_id] = events[-1].seq
        if self.lose_replies > 0:
            self.lose_replies -= 1
            raise StoreUnavailable("the test's store wrote, and the answer was lost")
        return sizes


def sleepy(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
    """One ``sleep`` call of 5 s per question, then an answer."""
    if messages[-1]["role"] == "tool":
        return "北京今天25度, 穿外套"
    return Completion(text="查一下", tool_calls=(ToolCall("", "test__sleep", '{"seconds": 5}'),))


def twice_sleepy(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
    """Two turns of one 5 s ``sleep`` call each, then an answer."""
    if sum(m["role"] == "tool" for m in messages) >= 2:
        return "北京今天25度, 穿外套"
    return Completion(text="查一下", tool_calls=(ToolCall("", "test__sleep", '{"seconds": 5}'),))


async def read_run(runtime: Any, store: FaultyDurableStore, run_id: str) -> tuple[list[EventDict], list[EventDict]]:
    """Read a run to its end: every event, and those that were not stored yet when the reader got them (none, but
    for a run whose store never took its close: then its close-out's, shown without being stored)."""
    seen: list[EventDict] = []
    early: list[EventDict] = []
    async with runtime.open_run("a", "北京今天适合穿什么?", thread_id="t", run_id=run_id) as stream:
        async for event in stream:
            if event["seq"] > store.stored_seq.get(run_id, 0):
                early.append(event)
            seen.append(event)
    return seen, early


async def run_r1(
    store: FaultyDurableStore, fn: Callable[..., Completion | str] = sleepy
) -> tuple[list[EventDict], list[EventDict], list[EventDict], RunRecord | None]:
    """Run ``r1`` on ``store`` (its fault set up by the test) to its end: what the reader got, what of it was not
    stored yet when shown, and the store's log and record of the run then."""
    async with open_runtime(config(), models={"m": FunctionModel(fn)}, store=store) as runtime:
        seen, early = await read_run(runtime, store, "r1")
        stored = await store.read_events("r1")
        record = await store.get_run("r1")
    return seen, early, stored, record


async def check_answered_and_stored(store: FaultyDurableStore) -> None:
    """Run ``r1`` on ``store``: the reader gets the whole answered run, every event stored before it was shown,
    and the stored log is what it got."""
    seen, early, stored, _ = await run_r1(store)
    assert early == []
    check_stream(seen)
    assert seen[-1]["result"]["outcome"] == "answered"
    assert stored == seen


async def test_every_event_a_reader_gets_is_stored_first_and_the_stored_log_is_what_it_got() -> None:
    store = FaultyDurableStore()
    with trio.fail_after(30):
        seen, early, stored, record = await run_r1(store)
    assert early == []
    check_stream(seen)
    assert seen[-1]["type"] == "RUN_FINISHED"
    assert stored == seen
    assert record is not None
    assert record.status is RunStatus.FINISHED


async def test_a_store_out_of_reach_for_a_moment_loses_no_run(autojump_clock: trio.testing.MockClock) -> None:
    store = FaultyDurableStore()

    async def blip(run_id: str, events: Sequence[EventDict]) -> None:
        if any(e["type"] == "TOOL_CALL_END" for e in events) and store.down_until < 0:
            store.down_until = trio.current_time() + WRITE_PATIENCE / 2

    store.on_write = blip
    await check_answered_and_stored(store)


async def test_a_write_whose_answer_was_lost_is_not_written_twice(autojump_clock: trio.testing.MockClock) -> None:
    store = FaultyDurableStore()

    async def lose(run_id: str, events: Sequence[EventDict]) -> None:
        if any(e["type"] == "TOOL_CALL_END" for e in events) and not store.stored_seq.get("lost"):
            store.stored_seq["lost"] = 1
            store.lose_replies = 1

    store.on_write = lose
    await check_answered_and_stored(store)


async def test_a_store_down_for_good_ends_the_run_store_unavailable_after_what_was_stored(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The store fails the writes of a run going on, and never answers its close-out either: the reader gets what
    was stored, then the close-out's events and ``store_unavailable``, which nobody could store (the one case
    where a reader sees past the stored log; a sweep closes the run as interrupted later)."""
    store = FaultyDurableStore()

    async def outage(run_id: str, events: Sequence[EventDict]) -> None:
        if any(e["type"] == "TOOL_CALL_RESULT" for e in events) and store.down_until < 0:
            store.down_until = trio.current_time() + 1000  # down for good

    store.on_write = outage
    seen, early, stored, record = await run_r1(store, twice_sleepy)
    check_stream(seen)  # the numbers go on from what was shown: nothing the reader saw is missing
    assert seen[-1]["type"] == "RUN_ERROR"
    assert seen[-1]["code"] == RunErrorCode.STORE_UNAVAILABLE
    assert stored == seen[: len(stored)]
    assert early == seen[len(stored) :]
    assert [e["type"] for e in early] == ["TOOL_CALL_RESULT", "RUN_ERROR"]  # the cancelled call, the ending
    assert record is not None
    assert record.status is RunStatus.RUNNING  # left for the sweep (no lease here to expire: a test store)


async def test_a_store_back_for_the_close_out_stores_the_store_unavailable_ending_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The store fails the writes of a run going on (the run ends ``store_unavailable``), and is back before the
    close-out gives up: the closing event is stored too, after the events shown."""
    store = FaultyDurableStore()

    async def outage(run_id: str, events: Sequence[EventDict]) -> None:
        if any(e["type"] == "TOOL_CALL_RESULT" for e in events) and store.down_until < 0:
            store.down_until = trio.current_time() + WRITE_PATIENCE + CLOSE_PATIENCE / 2
            store.stored_seq["before"] = store.stored_seq[run_id]

    store.on_write = outage
    seen, early, stored, record = await run_r1(store, twice_sleepy)
    assert early == []
    history = await store.load_history("t")
    check_stream(seen)
    assert seen[-1]["code"] == RunErrorCode.STORE_UNAVAILABLE
    assert stored == seen  # the client and the stored log agree, the ending included
    assert [e["seq"] for e in seen[: store.stored_seq["before"]]] == list(range(1, store.stored_seq["before"] + 1))
    assert record is not None
    assert (record.status, record.outcome) == (RunStatus.FAILED, Outcome.ERROR.value)
    assert [m["role"] for m in history] == ["user"]  # no turn was written after the failure


async def test_a_run_closed_by_another_process_ends_as_the_store_says(autojump_clock: trio.testing.MockClock) -> None:
    """Another process took the run for dead (its lease expired) and closed it: the run's reader gets the store's
    closing event, numbered after what it saw, and nothing the run did afterwards."""
    store = FaultyDurableStore()

    async def sweep(run_id: str, events: Sequence[EventDict]) -> None:
        if any(e["type"] == "TOOL_CALL_RESULT" for e in events) and "swept" not in store.stored_seq:
            last = store.stored_seq.get(run_id, 0)
            store.stored_seq["swept"] = last
            assert await store.inner.finish_run(run_id, status=RunStatus.INTERRUPTED, outcome="interrupted")
            await store.inner.append_events(run_id, [encoded_interruption(run_id, last + 1, time.time())])
            store.stored_seq[run_id] = last + 1

    store.on_write = sweep
    seen, early, stored, _ = await run_r1(store)
    assert early == []
    history = await store.load_history("t")
    check_stream(seen)
    assert seen[-1]["type"] == "RUN_ERROR"
    assert seen[-1]["code"] == RunErrorCode.INTERRUPTED
    assert seen[-1]["seq"] == store.stored_seq["swept"] + 1
    assert stored == seen
    assert [m["role"] for m in history] == ["user"]  # the turn that could not be written is not in the history


@attrs.define(eq=False)
class RacingStore(MemoryStore):
    """A memory store whose run ends (its last events stored) right after the first read of its log."""

    reads: int = 0

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventDict]:
        self.reads += 1
        found = await super().read_events(run_id, after_seq)
        if self.reads == 1:
            last = [{"type": "STEP_STARTED", "stepName": "m", "seq": 2}, {"type": "RUN_FINISHED", "seq": 3}]
            await self.append_turn("t", "r", [], stored_events(last), finish=RunFinish(RunStatus.FINISHED, "answered"))
        return found


async def test_a_resume_from_the_store_gets_every_event_of_a_run_that_ends_while_it_looks() -> None:
    """The run ends between the resume's read of its log and its look at the record: the resume still gets
    its last events, not only the terminal one."""
    store = RacingStore()
    await store.open_thread("t", None)
    await store.start_run("t", "r", "a", [])
    await store.append_events("r", stored_events([{"type": "RUN_STARTED", "threadId": "t", "runId": "r", "seq": 1}]))
    stream = await stored_run_stream(store, "r", 1, None)
    assert stream is not None
    assert [(e["seq"], e["type"]) for e in [await stream.receive(), await stream.receive()]] == [
        (2, "STEP_STARTED"),
        (3, "RUN_FINISHED"),
    ]
