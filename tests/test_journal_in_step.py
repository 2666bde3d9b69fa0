"""A store that writes in step (``writes_in_step``: the memory store) has a run's turn written as the run queues
it, in the run's own step, with the events queued before it (and what the run emitted before it was started, once
it is); a write going on keeps its place (the turn waits
for the writer), a durable journal never writes so, and a failing write ends the run with ``store_unavailable``
as a failing writer's does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation.durable.journal import RunJournal
from yao_actors.conversation.streaming.outlet import RunOutlet
from yao_actors.errors import InvalidStoreInput, RunError, RunErrorCode, StoreUnavailable
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.store import ConversationStore, MemoryStore
from yao_actors.store.records import EncodedEvent
from yao_actors.testing.servers import build_test_server

QUESTION = {"role": "user", "content": "北京今天适合穿什么?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "25度"}


@attrs.define(eq=False)
class SteppingStore(MemoryStore):
    """A memory store that notes how each turn of a run reached it (``in step`` or ``append_turn``), and can
    fail its in-step writes (``failing``: the error raised), or hold its ``append_turn`` until ``go`` is set."""

    log: list[tuple[str, int, int]] = attrs.field(factory=list)
    failing: Exception | None = None
    go: trio.Event | None = None

    @property
    def writes_in_step(self) -> bool:
        return True  # it changes append_turn, and writes in step the memory store's way too (noting each turn)

    def append_turn_in_step(
        self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[EncodedEvent]
    ) -> list[int]:
        self.log.append(("in step", len(messages), len(events)))
        if self.failing is not None:
            raise self.failing
        return super().append_turn_in_step(thread_id, run_id, messages, events)

    async def append_turn(
        self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[Any], **finish: Any
    ) -> Sequence[int] | None:
        if self.go is not None:
            await self.go.wait()
        self.log.append(("append_turn", len(messages), len(events)))
        return await super().append_turn(thread_id, run_id, messages, events, **finish)


def event(seq: int) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x", "seq": seq}


async def started(store: SteppingStore, *, durable: bool = False) -> tuple[RunJournal, list[int]]:
    """A started journal on ``store`` (thread ``t``, run ``r``), and the list its ``on_failure`` calls note in."""
    failures: list[int] = []
    await store.open_thread("t", None)
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=durable, on_failure=lambda: failures.append(1))
    await journal.start("a", [QUESTION])
    return journal, failures


def test_the_memory_store_writes_in_step_and_the_base_store_does_not() -> None:
    store = MemoryStore()
    assert store.writes_in_step is True
    assert ConversationStore.writes_in_step.fget(store) is False  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="does not write in step"):
        ConversationStore.append_turn_in_step(store, "t", "r", [], [])


async def test_a_turn_is_written_in_the_callers_step_with_the_events_queued_before_it() -> None:
    store = SteppingStore()
    journal, _ = await started(store)
    await journal.emit(event(1))
    await journal.emit(event(2))
    journal.turn([CALL, RESULT])  # no writer task runs: the turn is written here, or never before the close-out
    assert store.log == [("in step", 2, 2)]
    assert journal.stored == (QUESTION, CALL, RESULT)
    assert await store.load_history("t") == [QUESTION, CALL, RESULT]
    assert [e["seq"] for e in await store.read_events("r")] == [1, 2]
    await journal.emit(event(3))  # after the turn: waits for the next write
    assert [e["seq"] for e in await store.read_events("r")] == [1, 2]
    journal.turn([CALL])
    assert store.log[-1] == ("in step", 1, 1)
    assert [e["seq"] for e in await store.read_events("r")] == [1, 2, 3]


async def test_what_a_run_emitted_before_it_started_is_written_in_step_once_it_is_started() -> None:
    store = SteppingStore()
    await store.open_thread("t", None)
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(journal.serve)  # parked: were it woken, it would write with append_turn
        await journal.emit(event(1))  # the run's RUN_STARTED, emitted before the store has the run
        await journal.start("a", [QUESTION])
        assert store.log == [("in step", 0, 1)]  # written by start itself: no writer woken for it
        assert [e["seq"] for e in await store.read_events("r")] == [1]
        await journal.emit(event(2))
        journal.turn([CALL, RESULT])
        assert store.log == [("in step", 0, 1), ("in step", 2, 1)]
        await journal.close()
    assert store.log == [("in step", 0, 1), ("in step", 2, 1)]  # the writer never wrote


async def test_a_durable_journal_has_its_writer_write_what_was_emitted_before_the_start() -> None:
    store = SteppingStore()
    await store.open_thread("t", None)
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=True)
    await journal.emit(event(1))
    await journal.start("a", [QUESTION])
    assert store.log == []  # queued for the writer, which shows it once written
    await journal.flush()
    assert store.log == [("append_turn", 0, 1)]


async def test_a_turn_queued_while_the_writer_writes_waits_for_it_and_keeps_the_order() -> None:
    store = SteppingStore(go=trio.Event())
    journal, _ = await started(store)
    async with trio.open_nursery() as nursery:
        await nursery.start(journal.serve)
        await journal.emit(event(1))
        journal.checkpoint(whole_turn=False)  # the events before a batch: the writer has them written soon
        nursery.start_soon(journal.flush)  # a write going on, held by the store
        await trio.testing.wait_all_tasks_blocked()
        assert journal._writing.busy
        await journal.emit(event(2))
        journal.turn([CALL, RESULT])  # a write is going on: queued for the writer, not written in step
        assert store.log == []
        store.go.set()
        await journal.flush()
        nursery.cancel_scope.cancel()
    assert store.log == [("append_turn", 0, 1), ("append_turn", 2, 1)]
    assert await store.load_history("t") == [QUESTION, CALL, RESULT]
    assert [e["seq"] for e in await store.read_events("r")] == [1, 2]


async def test_a_durable_journal_never_writes_in_step() -> None:
    store = SteppingStore()
    journal, _ = await started(store, durable=True)
    journal.turn([CALL, RESULT])
    assert store.log == []  # queued for the writer: a durable store's run shows events only once written
    await journal.flush()
    assert store.log == [("append_turn", 2, 0)]


@pytest.mark.parametrize(
    "error", [StoreUnavailable("down"), InvalidStoreInput("refused")], ids=["unavailable", "refused"]
)
async def test_a_failing_in_step_write_stops_the_writes_as_a_failing_writer_does(error: Exception) -> None:
    store = SteppingStore(failing=error)
    journal, failures = await started(store)
    await journal.emit(event(1))
    journal.turn([CALL, RESULT])
    assert journal.failed
    assert failures == [1]  # the run is cancelled, once
    assert journal.stored == (QUESTION,)  # nothing of the refused write is kept as stored
    with pytest.raises(RunError) as raised:
        journal.turn([CALL])
    assert raised.value.code is RunErrorCode.STORE_UNAVAILABLE
    assert store.log == [("in step", 2, 1)]


async def test_a_failing_in_step_write_of_what_came_before_the_start_stops_the_writes() -> None:
    store = SteppingStore(failing=StoreUnavailable("down"))
    failures: list[int] = []
    await store.open_thread("t", None)
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=False, on_failure=lambda: failures.append(1))
    await journal.emit(event(1))
    await journal.start("a", [QUESTION])  # the run is stored as started: its RUN_STARTED's write fails
    assert journal.failed
    assert failures == [1]
    assert store.log == [("in step", 0, 1)]
    with pytest.raises(RunError) as raised:
        journal.turn([CALL])
    assert raised.value.code is RunErrorCode.STORE_UNAVAILABLE


async def test_a_run_whose_in_step_write_fails_ends_with_store_unavailable() -> None:
    store = SteppingStore()
    servers = {"test": ServerSpec("test", InMemoryTransport(build_test_server()))}
    config = Config(servers=servers, assistants={"a": AssistantSpec("a", "m", (), (ServerRef("test"),))})

    def script(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return "answer"
        return Completion(tool_calls=(ToolCall("c1", "test__echo", '{"text": "x"}'),))

    with trio.fail_after(30):
        async with open_runtime(config, models={"m": FunctionModel(script)}, store=store) as runtime:
            ok = await runtime.run("a", "one", thread_id="t")
            store.failing = StoreUnavailable("the test's store is down")
            failed = await runtime.run("a", "two", thread_id="t")
    assert ok.outcome is Outcome.ANSWERED
    assert ("in step", 2) in [(how, m) for how, m, _ in store.log]  # the first run's turn was written in step
    assert (failed.outcome, failed.code) == (Outcome.ERROR, RunErrorCode.STORE_UNAVAILABLE)
    assert failed.error == "the conversation store is unavailable"
    assert failed.events[-1]["code"] == "store_unavailable"
    assert [m["role"] for m in await store.load_history("t")] == ["user", "assistant", "tool", "assistant", "user"]


async def test_a_memory_store_subclass_that_changes_how_a_turn_is_written_sees_every_turn() -> None:
    class Mirroring(MemoryStore):
        """A store of one's own on the memory store that mirrors each turn (it overrides ``append_turn`` only)."""

        def __init__(self) -> None:
            super().__init__()
            self.mirrored: list[list[Any]] = []

        async def append_turn(
            self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[Any], **finish: Any
        ) -> Sequence[int] | None:
            self.mirrored.append(list(messages))
            return await super().append_turn(thread_id, run_id, messages, events, **finish)

    store = Mirroring()
    assert store.writes_in_step is False  # its own append_turn must see each turn: the writer calls it
    await store.open_thread("t", None)
    journal = RunJournal(store, "t", "r", RunOutlet(), durable=False)
    await journal.start("a", [QUESTION])
    async with trio.open_nursery() as nursery:
        await nursery.start(journal.serve)
        journal.turn([CALL, RESULT])
        await journal.flush()
        nursery.cancel_scope.cancel()
    assert store.mirrored == [[CALL, RESULT]]
    assert await store.load_history("t") == [QUESTION, CALL, RESULT]
