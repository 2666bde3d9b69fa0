"""Which call asked a question its transport did not tie to one (:mod:`yao_actors.tools.askers`): only by what is
certain. Fast checks with bare requests; tests/integration/test_input_routing.py has a real stdio server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from yao_actors.tools.askers import Askers
from yao_actors.tools.call_request import CallRequest


def call(name: str) -> CallRequest:
    return CallRequest(name, {}, 0.0, False)


async def in_flight(*names: str) -> tuple[Askers, list[CallRequest]]:
    """Askers with a call of each name entered, in that order."""
    askers, requests = Askers(), [call(name) for name in names]
    for request in requests:
        await askers.enter(request)
    return askers, requests


@asynccontextmanager
async def asking(askers: Askers) -> AsyncIterator[list[Any]]:
    """A question, waiting for its asker while the block runs; the list holds what ``asker`` said once it did."""
    found: list[Any] = []

    async def ask() -> None:
        found.append(await askers.asker())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        yield found


async def test_a_call_waiting_for_its_answer_cannot_be_the_asker() -> None:
    askers, ann, bob = Askers(), call("ann"), call("bob")
    await askers.enter(ann)
    askers.ask_user(ann)
    await askers.enter(bob)
    assert await askers.asker() is bob


async def test_a_question_waits_until_the_other_calls_were_answered() -> None:
    askers, (x, y, z) = await in_flight("x", "y", "z")
    async with asking(askers) as found:
        askers.leave(y, answered=True)
        late = call("late")  # started after the question: not a candidate
        await askers.enter(late)
        await trio.testing.wait_all_tasks_blocked()
        assert found == []
        askers.ask_user(z)  # z asked a question of its own: not this one's asker
    assert found == [x]


async def test_a_candidate_abandoned_meanwhile_makes_the_question_refused() -> None:
    askers, (_, y) = await in_flight("x", "y")
    async with asking(askers) as found:
        askers.leave(y, answered=False)  # its deadline: it may have been the asker
    assert found == ["the call that asked for input may be one that has ended"]


async def test_when_every_candidate_has_a_question_the_newest_is_refused_and_the_rest_told_apart() -> None:
    askers, (x, y) = await in_flight("x", "y")
    async with asking(askers) as first:
        assert await askers.asker() == "cannot tell which of 2 calls in flight asked for input"
        # The refused question's call ends (its tool failed with the refusal): the first question is the other's.
        askers.leave(y, answered=True)
    assert first == [x]


async def test_no_call_in_flight_means_no_asker() -> None:
    assert await Askers().asker() == "no call in flight can have asked for input"


async def test_one_at_a_time_a_call_waits_for_the_active_one_and_an_answered_one_for_its_turn() -> None:
    askers, x, y = Askers(one_at_a_time=True), call("x"), call("y")
    await askers.enter(x)
    order: list[str] = []

    async def enter(request: CallRequest) -> None:
        await askers.enter(request)
        order.append(request.name)

    async def resume(request: CallRequest) -> None:
        await askers.resume(request)
        order.append(f"{request.name} answered")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(enter, y)
        await trio.testing.wait_all_tasks_blocked()
        assert order == []  # x is active
        askers.ask_user(x)  # x waits for the user: y's turn
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["y"]
        nursery.start_soon(resume, x)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["y"]  # x's answer waits for y
        askers.leave(y, answered=True)
    assert order == ["y", "x answered"]
    assert askers.active() == {x}
