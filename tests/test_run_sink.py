"""``open_run(..., sink=...)``: a run's events awaited into the consumer's sink in the run's own task.

The websocket front end forwards every event of a run to its connection's writer; with a sink the events
skip the stream's channel and the task reading it. The run keeps every promise it makes through a stream:
each event once, in order, exactly one terminal event, backpressure, cancellation by a consumer that goes
away, and a close-out the consumer gets even when it is too slow for it.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.support import check_stream
from tests.test_conversation import call, open_weather_manager, scripted, slow_batch_model, text_reply, tools_reply
from yao_actors.config import RunTimeouts
from yao_actors.errors import ErrorKind
from yao_actors.events import EventDict, Outcome


async def test_every_event_goes_to_the_sink_in_the_run_task_and_the_stream_yields_none() -> None:
    model = scripted(
        tools_reply(call("w__get", {"city": "北京"}), text="查一下"), text_reply("北京今天25度"), text_reply("好的")
    )
    received: list[EventDict] = []
    tasks: set[Any] = set()

    async def sink(event: EventDict) -> None:
        tasks.add(trio.lowlevel.current_task())
        received.append(event)
        await trio.lowlevel.checkpoint()

    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            async with manager.open_run("a", "北京今天适合穿什么?", thread_id="t", sink=sink) as stream:
                from_stream = [event async for event in stream]
                reader = trio.lowlevel.current_task()
            later = await manager.run("a", "again", thread_id="t")
    assert from_stream == []
    check_stream(received)
    assert received[-1]["type"] == "RUN_FINISHED"
    assert received[-1]["result"]["text"] == "北京今天25度"
    assert len(tasks) == 1
    assert reader not in tasks  # the run's own task, not the reader's
    assert stream.result is not None
    assert stream.result.outcome is Outcome.ANSWERED
    assert later.ok  # the thread goes on


async def test_a_waiting_sink_holds_the_run_back() -> None:
    model = scripted(text_reply("x" * 200))  # with chunk_size=4: 50 deltas
    gate = trio.Event()
    received: list[EventDict] = []

    async def sink(event: EventDict) -> None:
        if len(received) == 3:
            await gate.wait()
        received.append(event)

    with trio.fail_after(10):
        async with open_weather_manager(model) as manager, manager.open_run("a", "Q", sink=sink) as stream:
            await trio.testing.wait_all_tasks_blocked()
            assert len(received) == 3  # nothing buffers ahead of a sink that waits
            gate.set()
            assert [event async for event in stream] == []
    check_stream(received)


async def test_a_failing_sink_cancels_the_run_gets_nothing_more_and_its_error_comes_out_of_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[EventDict] = []

    async def sink(event: EventDict) -> None:
        if event["type"] == "TOOL_CALL_RESULT":
            raise ValueError("the consumer broke")
        received.append(event)
        await trio.lowlevel.checkpoint()

    async with open_weather_manager(slow_batch_model(1000)) as manager:
        failure = None
        async with manager.open_run("a", "slow", thread_id="t", sink=sink) as stream:
            try:
                async for _ in stream:
                    pass
            except ValueError as error:
                failure = error
        after = await manager.run("a", "next", thread_id="t")
    assert str(failure) == "the consumer broke"
    assert received[-1]["type"] != "TOOL_CALL_RESULT"  # nothing after the failure
    assert stream.result is not None
    assert stream.result.outcome is Outcome.CANCELLED
    assert [r.kind for r in stream.result.tool_results] == [None, ErrorKind.CANCELLED]
    assert after.text == "seen 6 messages"  # the history stayed valid


async def test_a_closed_sink_is_a_consumer_gone_and_cancels_the_run(autojump_clock: trio.testing.MockClock) -> None:
    async def sink(event: EventDict) -> None:
        await trio.lowlevel.checkpoint()
        if event["type"] == "TOOL_CALL_START":
            raise trio.ClosedResourceError

    async with (
        open_weather_manager(slow_batch_model(1000)) as manager,
        manager.open_run("a", "slow", sink=sink) as stream,
    ):
        assert [event async for event in stream] == []
    assert stream.result is not None
    assert stream.result.outcome is Outcome.CANCELLED


async def test_a_sink_too_slow_for_the_close_out_leaves_the_rest_to_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[EventDict] = []

    async def sink(event: EventDict) -> None:
        if any(e["type"] == "TEXT_MESSAGE_START" for e in received):
            await trio.sleep_forever()  # a client that stopped reading
        received.append(event)

    async with (
        open_weather_manager(scripted(text_reply("x" * 40))) as manager,
        manager.open_run("a", "Q", sink=sink) as stream,
    ):
        await trio.sleep(1)
        stream.cancel()
        late = [event async for event in stream]  # after the close-out's grace ran out
    check_stream([*received, *late])
    assert received[-1]["type"] == "TEXT_MESSAGE_START"
    assert late[-1]["type"] == "RUN_FINISHED"
    assert late[-1]["outcome"] == {"type": "cancelled"}


@pytest.mark.parametrize("calls", [1, 2])
async def test_a_sink_slower_than_the_turn_deadline_still_gets_every_tool_result(
    autojump_clock: trio.testing.MockClock, calls: int
) -> None:
    # The calls finish at once; the sink then holds each TOOL_CALL_RESULT longer than the turn's deadline. The
    # deadline bounds the calls, not the telling of their results: each one still reaches the sink, once.
    model = scripted(tools_reply(*(call("w__echo", {"n": n}, f"c{n}") for n in range(calls))), text_reply("好了"))
    received: list[EventDict] = []

    async def sink(event: EventDict) -> None:
        if event["type"] == "TOOL_CALL_RESULT":
            await trio.sleep(10)
        received.append(event)

    timeouts = RunTimeouts(run=5000, model=100, turn=5)
    async with (
        open_weather_manager(model, timeouts=timeouts) as manager,
        manager.open_run("a", "Q", thread_id="t", sink=sink) as stream,
    ):
        assert [event async for event in stream] == []
    check_stream(received)
    results = [e["toolCallId"] for e in received if e["type"] == "TOOL_CALL_RESULT"]
    assert results == [f"c{n}" for n in range(calls)]
    assert stream.result is not None
    assert stream.result.outcome is Outcome.ANSWERED
    assert [r.ok for r in stream.result.tool_results] == [True] * calls
