"""The relay both front ends share: exactly one terminal event, numbered after what the client has; a run refused
before its stream opened goes to the front end's own refusal when it has one; admission of a client and a run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from yao_actors.errors import RunError, RunErrorCode
from yao_actors.service.auth import Credential, Handshake
from yao_actors.service.budget import RunBudget, TooManyRuns
from yao_actors.service.relay import Refusal, RunRelay, admit_client, admit_run
from yao_actors.specs import ServiceSpec


class ListStream:
    """A run's stream of the given events (then its end)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = list(events)
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def receive_nowait(self) -> dict[str, Any]:
        if not self._events:
            raise trio.EndOfChannel
        return self._events.pop(0)

    async def receive(self) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return self.receive_nowait()

    def __aiter__(self) -> ListStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        raise StopAsyncIteration


@asynccontextmanager
async def opened(stream: ListStream, fail: Exception | None = None) -> AsyncIterator[ListStream]:
    await trio.lowlevel.checkpoint()
    yield stream
    if fail is not None:
        raise fail


@asynccontextmanager
async def refused(error: Exception) -> AsyncIterator[ListStream]:
    await trio.lowlevel.checkpoint()
    raise error
    yield ListStream([])  # pragma: no cover


STARTED = {"type": "RUN_STARTED", "threadId": "t9", "runId": "r1", "seq": 1}
TEXT = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "seq": 2}


async def test_a_run_ending_without_a_terminal_event_gets_one_numbered_after_the_last() -> None:
    sent: list[dict[str, Any]] = []

    async def send(event: dict[str, Any]) -> None:
        sent.append(dict(event))

    relay = RunRelay("r1", "", send)
    await relay.relay(opened(ListStream([STARTED, TEXT])))
    assert [event["type"] for event in sent] == ["RUN_STARTED", "TEXT_MESSAGE_START", "RUN_ERROR"]
    assert sent[-1]["code"] == RunErrorCode.RUN_INCOMPLETE
    assert sent[-1]["seq"] == 3
    assert relay.thread_id == "t9"  # learnt from RUN_STARTED
    await relay.end("again", RunErrorCode.INTERNAL_ERROR)
    assert len(sent) == 3  # exactly one terminal event


async def test_a_failure_after_the_terminal_event_adds_nothing_and_one_before_it_ends_the_run() -> None:
    sent: list[dict[str, Any]] = []

    async def send(event: dict[str, Any]) -> None:
        sent.append(dict(event))

    finished = {"type": "RUN_FINISHED", "threadId": "t9", "runId": "r1", "seq": 3, "result": {}}
    await RunRelay("r1", "t9", send).relay(opened(ListStream([STARTED, TEXT, finished]), ZeroDivisionError()))
    assert [event["type"] for event in sent] == ["RUN_STARTED", "TEXT_MESSAGE_START", "RUN_FINISHED"]
    sent.clear()
    await RunRelay("r1", "t9", send).relay(opened(ListStream([STARTED]), ZeroDivisionError()))
    assert [(event["type"], event.get("code")) for event in sent] == [
        ("RUN_STARTED", None),
        ("RUN_ERROR", RunErrorCode.INTERNAL_ERROR),
    ]


async def test_a_run_refused_before_its_stream_goes_to_the_front_ends_refusal() -> None:
    sent: list[dict[str, Any]] = []
    refusals: list[Exception] = []

    async def send(event: dict[str, Any]) -> None:
        sent.append(dict(event))

    async def refuse(error: Exception) -> None:
        refusals.append(error)

    unknown = RunError("unknown assistant 'x'", code=RunErrorCode.UNKNOWN_ASSISTANT)
    relay = RunRelay("r1", "t1", send, refuse)
    await relay.relay(refused(unknown))
    assert (refusals, sent, relay.streaming) == ([unknown], [], False)
    # Without a refusal of its own (the websocket), the same run gets its RUN_ERROR.
    await RunRelay("r2", "t1", send).relay(refused(unknown))
    assert [(event["type"], event["code"]) for event in sent] == [("RUN_ERROR", RunErrorCode.UNKNOWN_ASSISTANT)]


async def test_a_cancel_before_the_stream_opens_takes_effect_when_it_does() -> None:
    async def send(event: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()

    stream = ListStream([STARTED])
    relay = RunRelay("r1", "t1", send)
    relay.cancel()
    await relay.relay(opened(stream))
    assert stream.cancelled


def test_clients_are_admitted_by_origin_then_token() -> None:
    spec = ServiceSpec(allowed_origins=("http://ok.example",))
    credentials = [Credential(principal="alice", token="s3cret", source="test")]
    bearer = {"authorization": "Bearer s3cret"}
    foreign = admit_client(Handshake(headers={"origin": "http://evil.example", **bearer}), spec, credentials)
    assert isinstance(foreign, Refusal)
    assert (foreign.status, foreign.code) == (403, "origin_not_allowed")
    missing = admit_client(Handshake(headers={"origin": "http://ok.example"}), spec, credentials)
    assert isinstance(missing, Refusal)
    assert missing.status == 401
    assert ("www-authenticate", "Bearer") in missing.headers
    assert admit_client(Handshake(headers={"origin": "http://ok.example", **bearer}), spec, credentials) == "alice"


async def test_runs_are_admitted_within_the_budget_and_not_while_shutting_down() -> None:
    async with trio.open_nursery() as nursery:
        budget = RunBudget(limit=2, per_principal=1, nursery=nursery)
        slot = admit_run(budget, "alice")
        with pytest.raises(TooManyRuns) as share:
            admit_run(budget, "alice")
        assert share.value.principal_limit
        with pytest.raises(RunError) as stopping:
            admit_run(budget, "bob", stopping=True)
        assert stopping.value.code is RunErrorCode.SHUTTING_DOWN
        slot.release()
        budget.closing = True
        with pytest.raises(RunError) as closing:
            admit_run(budget, "alice")
        assert closing.value.code is RunErrorCode.SHUTTING_DOWN
