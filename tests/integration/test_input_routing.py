"""A stdio server's questions reach the call that asked, and only it: the transport does not say which call asked,
so one principal's open question must not block another's asking call, nor reach it; two asking calls of one batch
each get their own question. The asking server (:mod:`yao_actors.testing.asking`) runs as a real stdio process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.integration.asking_support import asking_server
from tests.integration.test_input_interrupts import BOOKING, config, interrupts_of, resolved
from tests.support import check_stream
from yao_actors import Completion, FunctionModel, Outcome, ToolCall, open_runtime
from yao_actors.runtime import Runtime

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")


def booking_model() -> tuple[FunctionModel, list[list[dict[str, Any]]]]:
    """Books each hotel the user names ("book Grand Plaza": two calls in one turn), then says what the tools said."""
    seen: list[list[dict[str, Any]]] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        seen.append(messages)
        last = messages[-1]
        if last["role"] == "tool":
            return " | ".join(m["content"] for m in messages if m["role"] == "tool")
        hotels = last["content"].split()[1:]
        return Completion(
            tool_calls=[ToolCall(f"c_{hotel}", "asking__book", json.dumps({"hotel": hotel})) for hotel in hotels]
        )

    return FunctionModel(script), seen


@asynccontextmanager
async def stdio_runtime() -> AsyncIterator[tuple[Runtime, list[list[dict[str, Any]]]]]:
    scripted, seen = booking_model()
    async with asking_server("stdio") as where, open_runtime(config(where, "legacy"), models={"m": scripted}) as rt:
        yield rt, seen


def tool_result(seen: list[list[dict[str, Any]]], call_id: str) -> Any:
    return json.loads(next(m for m in seen[-1] if m.get("tool_call_id") == call_id)["content"])


async def test_one_principals_open_question_does_not_block_anothers_asking_call() -> None:
    with trio.fail_after(60):
        async with stdio_runtime() as (rt, seen):
            ann = await rt.run("a", "book Grand", thread_id="ta", principal="ann")
            (ann_question,) = interrupts_of(ann.events)
            # Ann's call is held open for her answer; Bob's call asks while it is.
            bob = await rt.run("a", "book Plaza", thread_id="tb", principal="bob")
            (bob_question,) = interrupts_of(bob.events)
            bob_done = await rt.run(
                "a", [], thread_id="tb", principal="bob", resume=resolved(bob_question, "accept", BOOKING)
            )
            bob_booked = tool_result(seen, "c_Plaza")
            later = BOOKING | {"date": "2027-03-03"}
            ann_done = await rt.run(
                "a", [], thread_id="ta", principal="ann", resume=resolved(ann_question, "accept", later)
            )
            ann_booked = tool_result(seen, "c_Grand")
    for result in (ann, bob, bob_done, ann_done):
        check_stream(result.events)
    assert (ann_question["toolCallId"], ann_question["message"]) == (
        "c_Grand",
        "Booking Grand: which day, how many guests?",
    )
    assert (bob_question["toolCallId"], bob_question["message"]) == (
        "c_Plaza",
        "Booking Plaza: which day, how many guests?",
    )
    assert bob_done.outcome is ann_done.outcome is Outcome.ANSWERED
    # Each answer completed the call of the one who gave it.
    assert {k: bob_booked[k] for k in ("hotel", "date")} == {"hotel": "Plaza", "date": "2027-01-02"}
    assert {k: ann_booked[k] for k in ("hotel", "date")} == {"hotel": "Grand", "date": "2027-03-03"}


async def test_two_asking_calls_of_one_batch_each_get_their_own_question() -> None:
    with trio.fail_after(60):
        async with stdio_runtime() as (rt, seen):
            first = await rt.run("a", "book Grand Plaza", thread_id="t")
            questions = {q["toolCallId"]: q for q in interrupts_of(first.events)}
            answers = [
                entry
                for call, day in (("c_Grand", "2027-01-01"), ("c_Plaza", "2027-02-02"))
                for entry in resolved(questions[call], "accept", BOOKING | {"date": day})
            ]
            done = await rt.run("a", [], thread_id="t", resume=answers)
            booked = {call: tool_result(seen, call) for call in questions}
            # Once the server has asked, the next batch's questions are tied at once: no call is refused.
            again = await rt.run("a", "book Ritz Savoy", thread_id="t2")
    check_stream(first.events)
    check_stream(done.events)
    assert first.outcome is Outcome.INTERRUPT
    assert {c: q["message"] for c, q in questions.items()} == {
        "c_Grand": "Booking Grand: which day, how many guests?",
        "c_Plaza": "Booking Plaza: which day, how many guests?",
    }
    assert done.outcome is Outcome.ANSWERED
    for call, hotel, day in (("c_Grand", "Grand", "2027-01-01"), ("c_Plaza", "Plaza", "2027-02-02")):
        assert {k: booked[call][k] for k in ("hotel", "date")} == {"hotel": hotel, "date": day}
    assert {q["toolCallId"]: q["message"].split(":")[0] for q in interrupts_of(again.events)} == {
        "c_Ritz": "Booking Ritz",
        "c_Savoy": "Booking Savoy",
    }
    assert not [e for e in again.events if e["type"] == "CUSTOM" and e["name"] == "sequential_retry"]


async def test_with_identity_principal_each_principal_asks_through_a_process_of_its_own() -> None:
    scripted, seen = booking_model()
    with trio.fail_after(60):
        async with (
            asking_server("stdio") as where,
            open_runtime(config(where, "legacy", identity="principal"), models={"m": scripted}) as rt,
        ):
            router = rt.routers["asking"]
            # Ann's batch asks two questions at once while Bob's asks one.
            runs: dict[str, Any] = {}

            async def book(principal: str, text: str) -> None:
                runs[principal] = await rt.run("a", text, thread_id=f"t-{principal}", principal=principal)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(book, "ann", "book Grand Plaza")
                nursery.start_soon(book, "bob", "book Ritz")
            pids = {name: c.handle.statistics().pid for name, c in router.connections.items()}
            asked = {p: {q["toolCallId"]: q["message"] for q in interrupts_of(r.events)} for p, r in runs.items()}
            (bob_question,) = interrupts_of(runs["bob"].events)
            bob_answer = resolved(bob_question, "accept", BOOKING)
            bob_done = await rt.run("a", [], thread_id="t-bob", principal="bob", resume=bob_answer)
            bob_booked = tool_result(seen, "c_Ritz")
    assert set(pids) == {"ann", "bob"}
    assert pids["ann"] != pids["bob"]
    assert asked == {
        "ann": {
            "c_Grand": "Booking Grand: which day, how many guests?",
            "c_Plaza": "Booking Plaza: which day, how many guests?",
        },
        "bob": {"c_Ritz": "Booking Ritz: which day, how many guests?"},
    }
    assert bob_done.outcome is Outcome.ANSWERED
    assert bob_booked["hotel"] == "Ritz"
