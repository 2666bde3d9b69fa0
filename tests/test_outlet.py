"""A run's outlet: its events as its reader gets them (``open_run``'s stream).

The run may get ``EVENT_BUFFER`` events ahead of its reader, then waits; a reader that stops reading never holds the
run's close-out (the rest waits in the log); a burst already visible is taken without a trip through the scheduler.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tests.support import check_stream
from tests.test_conversation import call, open_weather_manager, scripted, slow_batch_model, text_reply, tools_reply
from yao_actors.config import RunTimeouts
from yao_actors.conversation.manager import EVENT_BUFFER
from yao_actors.conversation.order import RunStream
from yao_actors.conversation.streaming.outlet import OutletReader, RunOutlet, forward_events
from yao_actors.errors import ErrorKind
from yao_actors.events import EventDict, Outcome


async def test_a_reader_that_waits_holds_the_run_back() -> None:
    model = scripted(text_reply("x" * 200))  # with chunk_size=4: 50 deltas
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager, manager.open_run("a", "Q") as stream:
            received = [await stream.receive() for _ in range(3)]
            await trio.testing.wait_all_tasks_blocked()
            outlet = stream._order.outlet
            assert outlet.emitted - outlet.consumed == EVENT_BUFFER  # the run waits for its reader
            assert not outlet.done
            received += [event async for event in stream]
    check_stream(received)
    assert received[-1]["type"] == "RUN_FINISHED"


async def test_a_reader_that_stopped_reading_never_holds_the_close_out(autojump_clock: trio.testing.MockClock) -> None:
    async with (
        open_weather_manager(scripted(text_reply("x" * 400))) as manager,
        manager.open_run("a", "Q") as stream,
    ):
        received = [await stream.receive()]
        while received[-1]["type"] != "TEXT_MESSAGE_START":
            received.append(await stream.receive())
        stream.cancel()  # and reads nothing more until the run is over
        with trio.fail_after(1):
            await stream.wait_done()
        received += [event async for event in stream]
    check_stream(received)
    assert received[-1]["outcome"] == {"type": "cancelled"}


async def test_a_consumer_whose_own_code_fails_leaves_and_its_run_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_weather_manager(slow_batch_model(1000)) as manager:
        opened: list[RunStream] = []

        async def consume() -> None:
            async with manager.open_run("a", "slow", thread_id="t") as stream:
                opened.append(stream)
                async for event in stream:
                    if event["type"] == "TOOL_CALL_RESULT":
                        raise ValueError("the consumer broke")

        with pytest.raises(ValueError, match="the consumer broke"):
            await consume()
        after = await manager.run("a", "next", thread_id="t")
    [stream] = opened
    assert stream.result is not None
    assert stream.result.outcome is Outcome.CANCELLED
    assert [r.kind for r in stream.result.tool_results] == [None, ErrorKind.CANCELLED]
    assert after.text == "seen 6 messages"  # the history stayed valid


async def test_closing_the_stream_is_a_consumer_gone_and_cancels_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_weather_manager(slow_batch_model(1000)) as manager, manager.open_run("a", "slow") as stream:
        async for event in stream:
            if event["type"] == "TOOL_CALL_START":
                break
        await stream.aclose()
        with trio.fail_after(1):
            await stream.wait_done()
    assert stream.result is not None
    assert stream.result.outcome is Outcome.CANCELLED


@pytest.mark.parametrize("calls", [1, 2])
async def test_a_reader_slower_than_the_turn_deadline_still_gets_every_tool_result(
    autojump_clock: trio.testing.MockClock, calls: int
) -> None:
    # The calls finish at once; the reader then takes longer than the turn's deadline over each TOOL_CALL_RESULT.
    # The deadline bounds the calls, not the telling of their results: each one still reaches the reader, once.
    model = scripted(tools_reply(*(call("w__echo", {"n": n}, f"c{n}") for n in range(calls))), text_reply("好了"))
    received: list[EventDict] = []
    timeouts = RunTimeouts(run=5000, model=100, turn=5)
    async with (
        open_weather_manager(model, timeouts=timeouts) as manager,
        manager.open_run("a", "Q", thread_id="t") as stream,
    ):
        async for event in stream:
            if event["type"] == "TOOL_CALL_RESULT":
                await trio.sleep(10)
            received.append(event)
    check_stream(received)
    results = [e["toolCallId"] for e in received if e["type"] == "TOOL_CALL_RESULT"]
    assert sorted(results) == [f"c{n}" for n in range(calls)]  # each once, in the order the calls finished
    assert stream.result is not None
    assert stream.result.outcome is Outcome.ANSWERED
    assert [r.ok for r in stream.result.tool_results] == [True] * calls


async def test_a_visible_burst_is_taken_without_a_trip_through_the_scheduler() -> None:
    outlet = RunOutlet()
    outlet.show([{"type": "RUN_STARTED", "seq": 1}, {"type": "STEP_STARTED", "seq": 2}])
    forwarded: list[tuple[int, int]] = []
    batches = 0

    class Counter(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            nonlocal batches
            batches += 1

    reader = OutletReader(outlet)

    async def forward(event: EventDict) -> None:
        forwarded.append((event["seq"], batches))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward_events, reader, forward)
        await trio.testing.wait_all_tasks_blocked()
        assert [seq for seq, _ in forwarded] == [1, 2]
        trio.lowlevel.add_instrument(Counter())
        outlet.show([{"type": "STEP_FINISHED", "seq": 3}, {"type": "TEXT_MESSAGE_START", "seq": 4}])
        outlet.end([{"type": "RUN_FINISHED", "seq": 5}])
    assert [seq for seq, _ in forwarded] == [1, 2, 3, 4, 5]
    assert len({steps for seq, steps in forwarded if seq > 2}) == 1  # the three in one step of the forwarding task


async def test_a_reader_after_a_seq_gets_only_what_follows_and_the_end() -> None:
    outlet = RunOutlet()
    outlet.show([{"type": "RUN_STARTED", "seq": 1}, {"type": "STEP_STARTED", "seq": 2}])

    reader = OutletReader(outlet, after_seq=1)
    assert reader.receive_nowait()["seq"] == 2
    with pytest.raises(trio.WouldBlock):
        reader.receive_nowait()
    outlet.end([{"type": "RUN_ERROR", "seq": 3}])
    assert reader.receive_nowait()["seq"] == 3
    with pytest.raises(trio.EndOfChannel):
        reader.receive_nowait()
