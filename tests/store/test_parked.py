"""Held calls (``store.parked_calls()``), the contract over every backend (memory, SQLite in tmp_path, a real
redis-server): who holds a call, an answer delivered at most once and taken by its holder, the outcome carried
back once, and a holder that stops renewing taken for dead; and two runtimes sharing a store, one holding a
handshake-era call open and the other answering it through the store."""

from __future__ import annotations

import contextlib
import json

import pytest
import trio

from tests.integration.test_input_interrupts import BOOK, BOOKING, bookings, config, interrupts_of, model, resolved
from tests.store.conftest import Clock
from tests.store.test_leases import GUARD, SHORT, let_expire
from yao_actors import Outcome, open_runtime
from yao_actors.config import InMemoryTransport
from yao_actors.errors import ErrorKind, InvalidStoreInput, RunErrorCode
from yao_actors.specs import StoreSpec
from yao_actors.store import ConversationStore, ParkedCalls, open_store
from yao_actors.testing.asking import build_asking_server
from yao_actors.tools.input_requests import InputRequest, InputRound
from yao_actors.tools.parked_relay import outcome_of, outcome_record
from yao_actors.tools.results import ToolOutcome

ANSWER = {"action": "accept", "content": {"name": "Ada", "note": "naïve ✓"}}
OUTCOME = {"result": {"greeting": "Hello, Ada!"}, "error": None, "kind": None}


def parked(store: ConversationStore) -> ParkedCalls:
    calls = store.parked_calls()
    assert calls is not None
    assert calls is store.parked_calls()
    return calls


async def test_a_holding_is_renewed_and_released_by_its_holder_only(store: ConversationStore) -> None:
    calls = parked(store)
    with trio.fail_after(GUARD):
        assert await calls.holder("k1") is None
        await calls.hold("k1", "a", 30)
        assert await calls.holder("k1") == "a"
        assert await calls.renew("k1", "a", 30)
        assert not await calls.renew("k1", "b", 30)
        await calls.release("k1", "b")  # not b's: nothing happens
        assert await calls.holder("k1") == "a"
        await calls.release("k1", "a")
        assert await calls.holder("k1") is None
        assert not await calls.renew("k1", "a", 30)
        assert not await calls.deliver("k1", ANSWER)


async def test_an_answer_is_delivered_once_and_taken_once_by_the_holder(store: ConversationStore) -> None:
    calls = parked(store)
    with trio.fail_after(GUARD):
        await calls.hold("k1", "a", 30)
        assert await calls.take_answer("k1", "a", 0) is None
        assert await calls.deliver("k1", ANSWER)
        assert not await calls.deliver("k1", {"action": "decline"})  # at most once
        assert await calls.take_answer("k1", "b", 0) is None  # not b's call
        assert await calls.take_answer("k1", "a", 0) == ANSWER
        assert await calls.take_answer("k1", "a", 0) is None
        assert await calls.holder("k1") == "a"  # still held: the call runs on with its answer


async def test_the_outcome_ends_the_holding_and_is_taken_once(store: ConversationStore) -> None:
    calls = parked(store)
    with trio.fail_after(GUARD):
        await calls.hold("k1", "a", 30)
        assert await calls.deliver("k1", ANSWER)
        assert await calls.take_answer("k1", "a", 0) == ANSWER
        assert await calls.take_outcome("k1", 0) is None
        assert not await calls.finish("k1", "b", OUTCOME)
        assert await calls.finish("k1", "a", OUTCOME)
        assert await calls.holder("k1") is None
        assert not await calls.finish("k1", "a", OUTCOME)
        assert await calls.take_outcome("k1", 0) == OUTCOME
        assert await calls.take_outcome("k1", 0) is None


async def test_a_holder_that_stops_renewing_is_taken_for_dead(store: ConversationStore, clock: Clock) -> None:
    calls = parked(store)
    with trio.fail_after(GUARD):
        await calls.hold("k1", "a", SHORT)
        await calls.hold("k2", "a", 30)
        await let_expire(clock)
        assert await calls.holder("k1") is None
        assert not await calls.deliver("k1", ANSWER)
        assert not await calls.renew("k1", "a", 30)
        assert not await calls.finish("k1", "a", OUTCOME)
        assert await calls.holder("k2") == "a"  # another call, renewed in time, is still held
        await calls.hold("k1", "c", 30)  # a ticket held again starts afresh
        assert await calls.holder("k1") == "c"
        assert await calls.deliver("k1", ANSWER)


async def test_the_takers_wait_for_what_the_other_side_writes(store: ConversationStore) -> None:
    calls = parked(store)
    taken: dict[str, object] = {}

    async def holder_side() -> None:
        answer = await calls.take_answer("k1", "a", GUARD)
        taken["answer"] = answer
        assert await calls.finish("k1", "a", {"echo": answer})

    async def requester_side() -> None:
        await trio.testing.wait_all_tasks_blocked()  # the holder waits for the answer (on the store's socket or clock)
        assert await calls.deliver("k1", ANSWER)
        taken["outcome"] = await calls.take_outcome("k1", GUARD)

    with trio.fail_after(GUARD):
        await calls.hold("k1", "a", 30)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(holder_side)
            nursery.start_soon(requester_side)
    assert taken == {"answer": ANSWER, "outcome": {"echo": ANSWER}}


async def test_a_take_that_finds_nothing_returns_none_after_its_timeout(store: ConversationStore) -> None:
    calls = parked(store)
    with trio.fail_after(GUARD):
        await calls.hold("k1", "a", 30)
        assert await calls.take_answer("k1", "a", 0.05) is None
        assert await calls.take_outcome("k1", 0.05) is None


async def test_an_answer_that_is_not_a_json_object_is_refused(store: ConversationStore) -> None:
    calls = parked(store)
    with trio.fail_after(GUARD):
        await calls.hold("k1", "a", 30)
        with pytest.raises(InvalidStoreInput, match="answer must be a JSON object"):
            await calls.deliver("k1", ["accept"])  # type: ignore[arg-type]
        with pytest.raises(InvalidStoreInput, match="outcome is not JSON"):
            await calls.finish("k1", "a", {"x": object()})
        assert await calls.deliver("k1", ANSWER)  # nothing was written


async def test_a_held_call_is_answered_from_another_runtime_sharing_the_store(
    store: ConversationStore, spec: StoreSpec, clock: Clock
) -> None:
    """Two runtimes sharing one store stand for two workers (each with a store object of its own, on the same
    SQLite file or Redis server): the resume reaches the one not holding the call, which gets the tool's result
    through the store and runs the rest of the loop; the call completes once, in the server of the runtime that
    held it."""
    scripted, seen = model(BOOK)
    holder_server, other_server = build_asking_server(), build_asking_server()
    with trio.fail_after(GUARD):
        async with (
            contextlib.nullcontext(store) if spec.type == "memory" else open_store(spec, clock=clock) as other,
            open_runtime(config(InMemoryTransport(holder_server), "legacy"), models={"m": scripted}, store=store) as a,
            open_runtime(config(InMemoryTransport(other_server), "legacy"), models={"m": scripted}, store=other) as b,
        ):
            first = await a.run("a", "book the Grand", thread_id="t")
            (interrupt,) = interrupts_of(first.events)
            second = await b.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            again = await b.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            counts = await bookings(a), await bookings(b)
    assert second.outcome is Outcome.ANSWERED, second.error
    (result,) = [e for e in second.events if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"]) == {"booked": True, "hotel": "Grand", **BOOKING, "count": 1}
    booked = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")  # b's model request saw it
    assert json.loads(booked["content"])["count"] == 1
    assert (again.outcome, again.code) == (Outcome.ERROR, RunErrorCode.UNKNOWN_INTERRUPT)
    assert counts == ({"count": 1}, {"count": 0})


async def test_a_resume_for_a_call_whose_holder_stopped_is_interrupt_expired(store: ConversationStore) -> None:
    scripted, seen = model(BOOK)
    with trio.fail_after(GUARD):
        cfg = config(InMemoryTransport(build_asking_server()), "legacy")
        async with open_runtime(cfg, models={"m": scripted}, store=store) as a:
            first = await a.run("a", "book the Grand", thread_id="t")
            (interrupt,) = interrupts_of(first.events)
        async with open_runtime(cfg, models={"m": scripted}, store=store) as b:
            late = await b.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            after = await b.run("a", "anything else?", thread_id="t")
    assert (late.outcome, late.code) == (Outcome.ERROR, RunErrorCode.INTERRUPT_EXPIRED)
    assert "the tool could not complete" in (late.error or "")
    assert after.outcome is Outcome.ANSWERED
    told = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert told["content"].startswith("Error")


def test_an_outcome_crosses_the_store_as_json_and_comes_back_the_same() -> None:
    asked = InputRound(
        (("q", InputRequest("asking", "greet", "form", "Name?", schema={"type": "object"})),),
        {"hotel": "Grand"},
        ticket="t2",
    )
    outcomes = [
        ToolOutcome(result={"booked": True}, duration=0.5),
        ToolOutcome(result="oops", error="boom", kind=ErrorKind.TOOL_ERROR, stderr_tail="trace"),
        ToolOutcome(result=asked, error="asks", kind=ErrorKind.INPUT_REQUIRED),  # the call asked again
        None,  # the call was no longer held when its answer came
    ]
    for outcome in outcomes:
        assert outcome_of(json.loads(json.dumps(outcome_record(outcome)))) == outcome


async def test_a_held_call_answered_where_it_is_held_releases_its_holding(store: ConversationStore) -> None:
    """The holder stops waiting on the store (Redis: a BLPOP cut short) once the call is answered in its own
    process, and the store goes on serving the thread."""
    scripted, _ = model(BOOK)
    calls = parked(store)
    with trio.fail_after(GUARD):
        cfg = config(InMemoryTransport(build_asking_server()), "legacy")
        async with open_runtime(cfg, models={"m": scripted}, store=store) as a:
            first = await a.run("a", "book the Grand", thread_id="t")
            (interrupt,) = interrupts_of(first.events)
            (record,) = await store.load_approvals("t")
            assert await calls.holder(record["ticket"]) is not None
            second = await a.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            while await calls.holder(record["ticket"]) is not None:  # noqa: ASYNC110
                await trio.sleep(0.01)
            after = await a.run("a", "anything else?", thread_id="t")
            count = await bookings(a)
    assert (second.outcome, after.outcome) == (Outcome.ANSWERED, Outcome.ANSWERED)
    assert count == {"count": 1}
