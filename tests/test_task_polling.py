"""Polling many tasks: the interval a server asks for is honoured within bounds (a server cannot make the client
spin, nor stall it), a worker taking up many stored tasks at once spreads their first polls, and a poll that
finds the server actor's queue full waits for room instead of being turned away."""

from __future__ import annotations

import itertools
import time

import trio
import trio.testing

from yao_actors.config import Config, InMemoryTransport, ServerSpec
from yao_actors.runtime import open_runtime
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.testing.task_servers import build_task_server
from yao_actors.tools.call_request import CallRequest
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_handle import ServerHandle
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_flow import TICK, poll_handle
from yao_actors.tools.task_handle import TaskWatch
from yao_actors.tools.task_state import MAX_POLL_INTERVAL, MIN_POLL_INTERVAL, TaskOp, TaskState
from yao_actors.tools.tool_server import CallOptions, ServerState

EXT = TaskDesign.EXTENSION


def handle(task_id: str, interval: float | None) -> TaskHandle:
    now = time.time()  # a stored deadline counts no later than task_timeout (3600 s by default) after creation
    return TaskHandle("srv", task_id, EXT, f"call-{task_id}", "forever", {}, "r", "t", now, now + 3600, interval)


async def polls_within(poll_ms: int, seconds: float) -> int:
    """The ``tasks/get`` a server asking ``poll_ms`` between polls gets while one call waits ``seconds`` on a task."""
    server, extension = build_task_server(poll_ms=poll_ms)
    spec = ServerSpec("tasks", InMemoryTransport(server))

    async def stored(_handle: TaskHandle) -> None:
        await trio.lowlevel.checkpoint()

    watch = TaskWatch("call-1", "run-1", "thread-1", seconds, stored)
    async with open_runtime(Config(servers={"tasks": spec})) as runtime:
        outcome = await runtime.servers["tasks"].call_tool("forever", {}, CallOptions(tasks=watch))
    assert "did not finish within" in (outcome.error or "")
    return extension.polls


async def test_a_server_asking_no_wait_or_a_negative_one_gets_the_floor_not_a_spin(
    autojump_clock: trio.abc.Clock,
) -> None:
    for poll_ms in (0, -5000):
        polls = await polls_within(poll_ms, 10.0)
        # 10 s at the floor of 50 ms between polls: 200, never more (a spin would never end here)
        assert 10.0 / MIN_POLL_INTERVAL * 0.9 <= polls <= 10.0 / MIN_POLL_INTERVAL + 1, (poll_ms, polls)


async def test_a_server_asking_an_absurd_wait_is_still_polled_at_the_ceiling(autojump_clock: trio.abc.Clock) -> None:
    polls = await polls_within(10**12, 300.0)  # asks for 31 years between polls
    assert 300.0 / MAX_POLL_INTERVAL - 1 <= polls <= 300.0 / MAX_POLL_INTERVAL, polls


async def test_tasks_taken_up_at_once_spread_their_first_polls_then_keep_the_interval(
    autojump_clock: trio.abc.Clock,
) -> None:
    polled: dict[str, list[float]] = {}
    start = trio.current_time()

    async def ops(op: TaskOp) -> ToolOutcome:
        await trio.lowlevel.checkpoint()
        if op.kind == "get":
            polled.setdefault(op.task_id, []).append(trio.current_time() - start)
        return ToolOutcome(task=TaskState(op.task_id, op.design, "working", "busy", 10.0))

    async def ready() -> None:
        await trio.lowlevel.checkpoint()

    with trio.move_on_after(35):
        async with trio.open_nursery() as nursery:
            for index in range(100):
                nursery.start_soon(poll_handle, ops, ready, handle(f"t{index}", 10.0), CallOptions())
    firsts = [times[0] for times in polled.values()]
    assert len(firsts) == 100
    assert all(5.0 <= first <= 15.0 for first in firsts)  # within half an interval of the interval
    # spread over the 40 ticks in between (polls due within one tick go out together), not one burst
    assert len(set(firsts)) >= 30
    for times in polled.values():  # after the first answer, the interval the server asks for, at most a tick more
        assert all(10.0 <= later - earlier < 10.0 + TICK for earlier, later in itertools.pairwise(times))


async def test_a_poll_finding_the_queue_full_waits_for_room_instead_of_being_turned_away(
    autojump_clock: trio.abc.Clock,
) -> None:
    spec = ServerSpec("srv", InMemoryTransport(build_task_server()[0]), queue_size=1)
    send, receive = trio.open_memory_channel[CallRequest](1)
    status = ServerStatus()
    status.set_state(ServerState.READY)
    server = ServerHandle._create(spec, send, status, None, None)
    filler = CallRequest("other", {}, trio.current_time(), False)
    send.send_nowait(filler)  # the queue is full
    async with trio.open_nursery() as nursery:
        outcomes: list[ToolOutcome] = []

        async def poll() -> None:
            outcomes.append(await server.poll_task(handle("t1", 1.0), CallOptions()))

        nursery.start_soon(poll)
        await trio.sleep(10)  # far past the first poll's time: it waits in line, not answered "queue full"
        assert outcomes == []
        assert await receive.receive() is filler
        freed = trio.current_time()
        request = await receive.receive()  # the poll comes in as soon as there is room
        assert trio.current_time() == freed
        assert request.task_op is not None
        assert (request.task_op.kind, request.task_op.task_id) == ("get", "t1")
        request.answer(ToolOutcome(result="done"))
    assert [outcome.result for outcome in outcomes] == ["done"]


async def test_polls_waiting_for_room_leave_the_queue_to_calls(autojump_clock: trio.abc.Clock) -> None:
    spec = ServerSpec("srv", InMemoryTransport(build_task_server()[0]), max_concurrency=2, queue_size=8)
    send, receive = trio.open_memory_channel[CallRequest](spec.queue_size)
    status = ServerStatus()
    status.set_state(ServerState.READY)
    server = ServerHandle._create(spec, send, status, None, None)
    async with trio.open_nursery() as nursery:
        for index in range(20):
            nursery.start_soon(server.poll_task, handle(f"t{index}", 1.0), CallOptions())
        await trio.sleep(10)  # every poll is due; no worker takes any
        assert send.statistics().current_buffer_used == spec.max_concurrency  # the other six places: for calls
        call = CallRequest("echo", {}, trio.current_time(), False)
        send.send_nowait(call)  # a call still finds room
        polls = [await receive.receive() for _ in range(spec.max_concurrency)]
        assert await receive.receive() is call
        for request in polls:
            request.answer(ToolOutcome(result="done"))
        await trio.testing.wait_all_tasks_blocked()
        assert send.statistics().current_buffer_used == spec.max_concurrency  # the next polls took their place
        nursery.cancel_scope.cancel()
