"""What a task's wait does with what it cannot trust: a stored handle's values, a server that never comes back."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types
import pytest
import trio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolRequestParams

from tests.integration.actor_checks import running
from tests.test_server_actor import FlakyConnect, memory_spec
from tests.test_task_flow import Server, state, watch
from tests.test_task_wire import NOW
from tests.test_task_wire import running as running_handle
from yao_actors.config import RestartPolicy
from yao_actors.errors import ErrorKind, UnknownThread
from yao_actors.specs import InMemoryTransport, ServerSpec
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.testing.task_extension import TaskIdParams
from yao_actors.tools.call_request import CallRequest
from yao_actors.tools.input_requests import MAX_QUESTIONS, InputRound
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_calls import result_outcome
from yao_actors.tools.server_status import ServerStatus
from yao_actors.tools.task_flow import TaskLine, follow_task, poll_handle
from yao_actors.tools.task_handle import TaskWatch
from yao_actors.tools.task_input import input_outcome
from yao_actors.tools.task_state import MAX_STATUS_BYTES, STATUS_EVERY, TaskState
from yao_actors.tools.task_wire import TASKS_EXTENSION
from yao_actors.tools.tool_server import CallOptions

EXT = TaskDesign.EXTENSION


def stored(**changes: Any) -> TaskHandle:
    """A handle as a store gave it back, with ``changes``; created now, for a wait of 10 s."""
    now = time.time()
    values: dict[str, Any] = {"created_at": now, "deadline": now + 10.0, **changes}
    return TaskHandle("srv", "t1", EXT, "call-1", "research", {}, "run-1", "thread-1", **values)


@pytest.mark.parametrize("interval", [-5, math.nan, "1", 1e-9, 0.0, math.inf])
async def test_a_stored_poll_interval_is_bounded_as_a_servers_is(autojump_clock: trio.abc.Clock, interval: Any) -> None:
    server = Server([])  # never ends
    options = CallOptions(tasks=watch(server, [], timeout=10.0))
    outcome = await poll_handle(server.ops, server.ready, stored(poll_interval=interval), options)
    assert outcome.kind is ErrorKind.TIMEOUT
    polls = server.asked.count("get")
    assert polls <= 10.0 / 0.05 + 1  # never more often than every 50 ms (nor less than every 60 s)
    assert server.asked[-1] == "cancel"


@pytest.mark.parametrize("deadline", [math.inf, 1e300, math.nan])
async def test_a_stored_deadline_past_the_task_timeout_is_cut_to_it(
    autojump_clock: trio.abc.Clock, deadline: float
) -> None:
    server = Server([])  # never ends
    options = CallOptions(tasks=watch(server, [], timeout=30.0))
    started = trio.current_time()
    outcome = await poll_handle(server.ops, server.ready, stored(deadline=deadline, poll_interval=1.0), options)
    assert outcome.kind is ErrorKind.TIMEOUT
    assert "did not finish within 30s (task_timeout)" in (outcome.error or "")
    assert trio.current_time() - started <= 31.0
    assert server.asked[-1] == "cancel"


async def test_without_a_watch_a_far_stored_deadline_is_cut_to_the_default_task_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    server = Server([])
    with trio.fail_after(7 * 24 * 3600):  # before: polled for ever
        outcome = await poll_handle(
            server.ops, server.ready, stored(deadline=math.inf, poll_interval=60.0), CallOptions()
        )
    assert outcome.kind is ErrorKind.TIMEOUT
    assert "did not finish within 3600s (task_timeout)" in (outcome.error or "")


async def test_a_taken_up_task_whose_server_never_comes_back_ends_at_its_deadline(
    autojump_clock: trio.abc.Clock,
) -> None:
    never = FlakyConnect(failures=10**9)
    policy = RestartPolicy(max_restarts=None, backoff_initial=1.0, backoff_max=4.0)
    server = Server([])
    async with running(memory_spec(restart=policy), connect=never) as actor:
        with trio.fail_after(7 * 24 * 3600):  # before: waited for the server for ever
            outcome = await actor.poll_task(stored(deadline=time.time() + 20.0), CallOptions(tasks=watch(server, [])))
    assert outcome.kind is ErrorKind.TIMEOUT
    assert "did not finish within 20s (task_timeout)" in (outcome.error or "")
    assert "'mem' was not ready again" in (outcome.error or "")


async def test_status_messages_are_cut_and_paced_and_the_last_is_never_lost(autojump_clock: trio.abc.Clock) -> None:
    long = "北" * 5000  # 15000 bytes
    answers = [state("working", f"{i} {long}", poll_interval=0.05) for i in range(200)]
    server = Server([*answers, state("working", "almost done", poll_interval=0.05), ToolOutcome(result="done")])
    said: list[tuple[float, str]] = []
    options = CallOptions(progress=lambda _p, _t, m: said.append((trio.current_time(), m or "")))
    start = trio.current_time()
    outcome = await poll_handle(
        server.ops, server.ready, stored(deadline=time.time() + 3600, poll_interval=0.05), options
    )
    assert outcome.result == "done"
    took = trio.current_time() - start  # ~10 s of polls every 50 ms, ~200 distinct messages
    assert len(said) <= took / STATUS_EVERY + 2
    assert all(len(m.encode()) <= MAX_STATUS_BYTES for _, m in said)
    assert said[0][1].startswith("0 北")
    assert said[0][1].endswith("…")
    assert said[-1][1] == "almost done"  # the last, sent at the end though within a second of the one before
    times = [t for t, _ in said]
    assert all(b - a >= STATUS_EVERY - 1e-6 for a, b in itertools.pairwise(times[:-1]))


async def test_a_changed_message_waits_for_its_second_not_for_the_next_poll(autojump_clock: trio.abc.Clock) -> None:
    server = Server([state("working", "b", poll_interval=30.0), ToolOutcome(result="done")])
    said: list[tuple[float, str]] = []
    options = CallOptions(progress=lambda _p, _t, m: said.append((trio.current_time(), m or "")))
    start = trio.current_time()
    seen = TaskState("t1", EXT, "working", "a", 0.1)
    await poll_handle(server.ops, server.ready, stored(deadline=time.time() + 3600), options, seen)
    assert [m for _, m in said] == ["a", "b"]
    assert said[1][0] - start == pytest.approx(STATUS_EVERY)  # not 30 s later, at the next poll


def stored_by(keep: Callable[[TaskHandle], Awaitable[None]]) -> CallOptions:
    return CallOptions(tasks=TaskWatch("call-1", "run-1", "thread-1", 3600.0, keep))


async def test_a_task_whose_handle_cannot_be_kept_is_cancelled_at_the_server(autojump_clock: trio.abc.Clock) -> None:
    async def gone(handle: TaskHandle) -> None:
        await trio.lowlevel.checkpoint()
        raise UnknownThread(f"thread {handle.thread_id!r} was not opened")

    server = Server([])
    outcome = await follow_task(
        TaskLine("srv", server.ops, server.ready), TaskState("t1", EXT, "working"), "research", {}, stored_by(gone)
    )
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert "could not be kept (thread 'thread-1' was not opened)" in (outcome.error or "")
    assert server.asked == ["cancel"]


async def test_a_wait_that_ends_while_the_handle_is_stored_cancels_the_task(autojump_clock: trio.abc.Clock) -> None:
    async def slow(handle: TaskHandle) -> None:
        await trio.sleep_forever()

    server = Server([])
    with trio.move_on_after(5) as waited:
        await follow_task(
            TaskLine("srv", server.ops, server.ready), TaskState("t1", EXT, "working"), "research", {}, stored_by(slow)
        )
    assert waited.cancelled_caught
    assert server.asked == ["cancel"]  # sent though the wait was cancelled (shielded)


class Liar(Extension):
    """Answers ``research`` with task ``t-1``, and every ``tasks/get`` with another task, completed."""

    identifier = TASKS_EXTENSION

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        return {"resultType": "task", "taskId": "t-1", "status": "working", "createdAt": NOW, "lastUpdatedAt": NOW}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        result = {"content": [{"type": "text", "text": "someone else's result"}]}
        return {"taskId": "t-2", "status": "completed", "createdAt": NOW, "lastUpdatedAt": NOW, "result": result}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        return {}


async def test_a_tasks_get_answer_about_another_task_is_a_malformed_answer() -> None:
    server = MCPServer("liar", extensions=[Liar()])

    @server.tool()
    async def research(topic: str) -> str:
        return f"inline {topic}"

    spec = ServerSpec("liar", InMemoryTransport(server), protocol="2026-07-28", tasks="auto")
    async with running_handle(spec) as handle:
        with trio.fail_after(30):
            outcome = await handle.call_tool("research", {"topic": "x"}, CallOptions())
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.result is None
    assert "malformed" in (outcome.error or "")
    assert "tasks/get for task 't-1' answered about task 't-2'" in (outcome.error or "")


@pytest.mark.parametrize(("task_id", "size"), [("", 0), ("x" * 513, 513)])
async def test_a_2025_11_25_task_id_out_of_bounds_is_a_clear_tool_error(task_id: str, size: int) -> None:
    task = {"taskId": task_id, "status": "working", "createdAt": NOW, "lastUpdatedAt": NOW, "ttl": None}
    answer = mcp_types.CreateTaskResult.model_validate({"task": task})
    request = CallRequest("research", {}, trio.current_time(), False)
    spec = ServerSpec("old", InMemoryTransport(MCPServer("old")))
    outcome = result_outcome(spec, ServerStatus(), request, answer)
    assert outcome.task is None
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert f"task.taskId: a task's id is 1 to 512 characters, not {size}" in (outcome.error or "")


async def test_a_2025_11_25_task_id_within_bounds_is_followed() -> None:
    task = {"taskId": "x" * 512, "status": "working", "createdAt": NOW, "lastUpdatedAt": NOW, "ttl": None}
    answer = mcp_types.CreateTaskResult.model_validate({"task": task})
    request = CallRequest("research", {}, trio.current_time(), False)
    spec = ServerSpec("old", InMemoryTransport(MCPServer("old")))
    outcome = result_outcome(spec, ServerStatus(), request, answer)
    assert outcome.task is not None
    assert outcome.task.task_id == "x" * 512


def asking(count: int) -> TaskState:
    form = {"type": "object", "properties": {"answer": {"type": "string"}}}
    ask = {"method": "elicitation/create", "params": {"message": "Which?", "requestedSchema": form}}
    return TaskState("t1", EXT, "input_required", input_requests={f"q{i}": ask for i in range(count)})


def test_a_task_asking_too_many_questions_at_once_is_declined_saying_why() -> None:
    crowded = input_outcome(stored(), asking(MAX_QUESTIONS + 1))
    assert crowded.kind is ErrorKind.TOOL_ERROR
    assert crowded.error == (
        f"the client declines the server's {MAX_QUESTIONS + 1} questions at once: at most {MAX_QUESTIONS} are put "
        "to the user"
    )
    most = input_outcome(stored(), asking(MAX_QUESTIONS))
    assert most.kind is ErrorKind.INPUT_REQUIRED
    assert isinstance(most.result, InputRound)
    assert len(most.result.questions) == MAX_QUESTIONS


async def test_a_task_asking_too_many_questions_is_cancelled_at_the_server(autojump_clock: trio.abc.Clock) -> None:
    server = Server([ToolOutcome(task=asking(1000))])
    outcome = await poll_handle(server.ops, server.ready, stored(poll_interval=0.1), CallOptions())
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert "1000 questions at once" in (outcome.error or "")
    assert server.asked == ["get", "cancel"]
