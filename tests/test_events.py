"""The AG-UI event emitter: validated models, camelCase dicts, runId/seq, one terminal event."""

from __future__ import annotations

import functools

import pydantic
import pytest
import trio
import trio.testing
from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    SubagentStartedEvent,
    TextMessageStartEvent,
    ToolCallResultEvent,
)

from yao_actors.errors import ErrorKind, RunErrorCode, StreamClosedError
from yao_actors.events import CustomName, EventDict, RunEvents, parse_event
from yao_actors.models.base import Usage
from yao_actors.tools.results import ToolCallResult


def collecting() -> tuple[RunEvents, list[EventDict]]:
    sent: list[EventDict] = []

    async def send(event: EventDict) -> None:
        sent.append(event)

    return RunEvents("run-1", "thread-1", send), sent


async def test_every_kind_is_camel_case_numbered_and_parses() -> None:
    events, sent = collecting()
    await events.run_started()
    await events.step_started("model")
    await events.text_start("m1")
    await events.text_content("m1", "hi")
    await events.text_end("m1")
    await events.reasoning_start("r1")
    await events.reasoning_content("r1", "hmm")
    await events.reasoning_end("r1")
    await events.tool_call_start("c1", "weather__get", parent_message_id="m1")
    await events.tool_call_args("c1", '{"city"')
    await events.tool_call_end("c1")
    await events.step_finished("model")
    result = ToolCallResult(call_id="c1", name="weather__get", server="weather", tool="get", arguments="{}")
    await events.tool_call_result("t1", result)
    await events.tool_progress("c1", 1, 2, "half")
    await events.tool_retry(1, ["c1"])
    await events.sequential_retry(["c1"])
    await events.server_status("weather", "restarting", "exit code 1")
    await events.usage(Usage(1, 2, 3), model="demo")
    await events.subagent_started("s1", "Loop Fallback")
    await events.subagent_error("s1", "boom", code="model_error")
    await events.subagent_finished("s1", {"text": "x"})
    await events.run_finished({"text": "done"}, usage=Usage(3, 4, 7), model="demo")

    assert [e["seq"] for e in sent] == list(range(1, len(sent) + 1))
    assert all(e["runId"] == "run-1" for e in sent)
    for event in sent:
        parse_event(event)
        assert all("_" not in key for key in event)
    assert sent[0]["threadId"] == "thread-1"
    assert sent[8]["toolCallName"] == "weather__get"
    assert sent[8]["parentMessageId"] == "m1"
    assert sent[-1]["usage"] == [{"model": "demo", "inputTokens": 3, "outputTokens": 4, "totalTokens": 7}]
    assert sent[-1]["outcome"] == {"type": "success"}


async def test_tool_call_result_carries_model_content_and_details() -> None:
    events, sent = collecting()
    ok = ToolCallResult(call_id="a", name="w__f", server="w", tool="f", arguments="{}", result={"t": "北京"})
    bad = ToolCallResult(
        call_id="b",
        name="w__f",
        server="w",
        tool="f",
        arguments="{",
        error="city: required",
        kind=ErrorKind.INVALID_ARGUMENTS,
        retryable=True,
        repaired=True,
    )
    await events.tool_call_result("m-a", ok)
    await events.tool_call_result("m-b", bad)
    first, second = (parse_event(e) for e in sent)
    assert isinstance(first, ToolCallResultEvent)
    assert first.content == '{"t":"北京"}'
    assert first.role == "tool"
    assert isinstance(second, ToolCallResultEvent)
    assert second.content == "Error: city: required"
    assert second.metadata is not None
    assert second.metadata["kind"] == "invalid_arguments"
    assert second.metadata["retryable"] is True
    assert second.metadata["repaired"] is True


async def test_custom_events_use_the_project_names() -> None:
    events, sent = collecting()
    await events.tool_progress("c", 0.5)
    await events.usage(Usage(1, 1, 2))
    names = []
    for data in sent:
        event = parse_event(data)
        assert isinstance(event, CustomEvent)
        names.append(event.name)
    assert names == [CustomName.TOOL_PROGRESS, CustomName.USAGE]
    assert sent[1]["value"] == {"model": None, "promptTokens": 1, "completionTokens": 1, "totalTokens": 2}


async def test_attribution_marks_events_inside_the_block_only() -> None:
    events, sent = collecting()
    with events.attributed_to("sub-1"):
        await events.subagent_started("sub-1", "Loop Fallback")
        await events.text_start("m")
    await events.text_start("n")
    started, inside, outside = (parse_event(e) for e in sent)
    assert isinstance(started, SubagentStartedEvent)
    assert started.subagent_run_id == "sub-1"
    assert isinstance(inside, TextMessageStartEvent)
    assert inside.subagent_run_id == "sub-1"
    assert isinstance(outside, TextMessageStartEvent)
    assert outside.subagent_run_id is None


@pytest.mark.parametrize("terminal", ["finished", "error", "cancelled"])
async def test_exactly_one_terminal_event(terminal: str) -> None:
    events, sent = collecting()
    await events.run_started()
    if terminal == "error":
        await events.run_error("model failed", code="model_error")
    else:
        await events.run_finished(None, cancelled=terminal == "cancelled")
    assert events.finished
    with pytest.raises(StreamClosedError):
        await events.run_finished(None)
    with pytest.raises(StreamClosedError):
        await events.run_error("again", code="x")
    with pytest.raises(StreamClosedError):
        await events.text_content("m", "late")
    assert len(sent) == 2
    last = parse_event(sent[-1])
    if terminal == "error":
        assert isinstance(last, RunErrorEvent)
        assert (last.message, last.code) == ("model failed", "model_error")
    else:
        assert isinstance(last, RunFinishedEvent)
        assert last.outcome is not None
        assert last.outcome.type == ("cancelled" if terminal == "cancelled" else "success")


async def test_a_bounded_channel_gets_backpressure() -> None:
    send, receive = trio.open_memory_channel[EventDict](0)
    events = RunEvents("r", "t", send)
    got: list[EventDict] = []

    async def consume() -> None:
        async with receive:
            async for event in receive:
                got.append(event)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            await events.run_started()
            await events.run_finished("ok")
            await send.aclose()
    assert [e["type"] for e in got] == ["RUN_STARTED", "RUN_FINISHED"]


async def test_an_event_whose_delivery_was_cancelled_is_not_emitted() -> None:
    send, receive = trio.open_memory_channel[EventDict](1)
    events = RunEvents("r", "t", send)
    await events.run_started()
    with trio.move_on_after(0.01):
        await events.run_finished("ok")  # the buffer is full: delivery blocks, then is cancelled
    assert not events.finished
    assert events.seq == 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(events.run_error, "cancelled", code="cancelled"))
        got = [await receive.receive(), await receive.receive()]
    assert [(e["type"], e["seq"]) for e in got] == [("RUN_STARTED", 1), ("RUN_ERROR", 2)]
    assert events.finished


async def test_concurrent_emitters_get_distinct_consecutive_seq() -> None:
    events, sent = collecting()
    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(events.tool_call_end, f"c{i}")
    assert [e["seq"] for e in sent] == list(range(1, 21))


async def test_emitters_blocked_behind_a_slow_consumer_go_in_arrival_order_and_a_cancelled_one_leaves_no_gap() -> None:
    send, receive = trio.open_memory_channel[EventDict](0)
    events = RunEvents("r", "t", send)
    started: list[str] = []

    async def emit(call_id: str, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        started.append(call_id)
        await events.tool_call_end(call_id)

    async with trio.open_nursery() as nursery:
        for i in range(5):
            await nursery.start(emit, f"c{i}")  # c0 is sending (no reader yet); c1..c4 wait in this order
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as waiter:
            waiter.cancel()
            await events.tool_call_end("never")  # cancelled before its turn
        got = [await receive.receive() for _ in range(5)]
        late = nursery.start_soon(events.tool_call_end, "c5")
        got.append(await receive.receive())
    assert late is None
    assert [e["toolCallId"] for e in got] == ["c0", "c1", "c2", "c3", "c4", "c5"]
    assert [e["seq"] for e in got] == [1, 2, 3, 4, 5, 6]
    assert events.seq == 6


async def test_reopen_takes_the_terminal_event_back_and_numbers_on_from_the_given_seq() -> None:
    """A run whose store refused its last events emits another terminal event, numbered after what was shown."""
    events, sent = collecting()
    await events.run_started()
    await events.step_started("model")
    await events.run_finished("ok")
    assert events.finished
    events.reopen(1)
    assert not events.finished
    await events.run_error("the store failed", code=RunErrorCode.STORE_UNAVAILABLE)
    assert [(e["type"], e["seq"]) for e in sent] == [
        ("RUN_STARTED", 1),
        ("STEP_STARTED", 2),
        ("RUN_FINISHED", 3),
        ("RUN_ERROR", 2),
    ]
    with pytest.raises(StreamClosedError):
        await events.step_finished("model")


def test_parse_event_refuses_invalid_dicts() -> None:
    with pytest.raises(pydantic.ValidationError):
        parse_event({"type": "TOOL_CALL_START", "toolCallId": "c"})
    with pytest.raises(pydantic.ValidationError):
        parse_event({"type": "NOT_AN_EVENT"})
