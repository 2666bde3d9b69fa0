"""Following a task (yao_actors.tools.task_flow) against a scripted server: the handle is stored before the
wait, status messages become progress once each, the result comes back once, and whenever the wait ends
before the task did (task_timeout, the run cancelled) the server is asked to cancel it; the caller's own deadline
bounds only the request that created the task."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import attrs
import trio

from yao_actors.errors import ErrorKind
from yao_actors.observability.metrics import OPEN_TASKS, TASKS, labelled
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.task_flow import TaskLine, follow_task
from yao_actors.tools.task_handle import TaskWatch
from yao_actors.tools.task_state import TaskOp, TaskState
from yao_actors.tools.tool_server import CallOptions

EXT = TaskDesign.EXTENSION
OLD = TaskDesign.HANDSHAKE_ERA


class Server:
    """Answers each request about the task from a script; remembers what was asked, in order."""

    def __init__(self, answers: Sequence[ToolOutcome]) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.log: list[str] = []
        self.ready_waits = 0

    async def ops(self, op: TaskOp) -> ToolOutcome:
        await trio.lowlevel.checkpoint()
        self.asked.append(op.kind)
        self.log.append(op.kind)
        if op.kind == "cancel":
            return ToolOutcome(task=TaskState(op.task_id, op.design, "working"))
        if not self.answers:
            return ToolOutcome(task=TaskState(op.task_id, op.design, "working", "still going"))
        return self.answers.pop(0)

    async def ready(self) -> None:
        self.ready_waits += 1
        await trio.lowlevel.checkpoint()


def state(status: str, message: str | None = None, design: TaskDesign = EXT, **kw: object) -> ToolOutcome:
    return ToolOutcome(task=TaskState("t1", design, status, message, **kw))  # type: ignore[arg-type]


def watch(server: Server, stored: list[TaskHandle], timeout: float = 3600.0) -> TaskWatch:
    async def store(handle: TaskHandle) -> None:
        await trio.lowlevel.checkpoint()
        server.log.append("stored")
        stored.append(handle)

    return TaskWatch("call-1", "run-1", "thread-1", timeout, store)


async def follow(server: Server, start: TaskState, options: CallOptions, tool: str = "research") -> ToolOutcome:
    return await follow_task(TaskLine("srv", server.ops, server.ready), start, tool, {"q": 1}, options)


async def test_the_handle_is_stored_before_the_wait_and_the_result_comes_once(autojump_clock: trio.abc.Clock) -> None:
    server = Server([state("working", "step 1"), state("working", "step 2"), ToolOutcome(result="done")])
    stored: list[TaskHandle] = []
    progress: list[tuple[float, str | None]] = []
    options = CallOptions(progress=lambda p, _t, m: progress.append((p, m)), tasks=watch(server, stored))
    outcome = await follow(server, TaskState("t1", EXT, "working", "step 1", 0.25), options)
    assert outcome.ok
    assert outcome.result == "done"
    assert outcome.task is None
    assert server.log[0] == "stored"  # before any poll
    assert server.asked == ["get", "get", "get"]
    assert progress == [(1.0, "step 1"), (2.0, "step 2")]  # each new message once, progress rising
    [handle] = stored
    assert (handle.server, handle.task_id, handle.design, handle.tool) == ("srv", "t1", EXT, "research")
    assert (handle.call_id, handle.run_id, handle.thread_id, handle.poll_interval) == (
        "call-1",
        "run-1",
        "thread-1",
        0.25,
    )
    assert handle.deadline - handle.created_at == 3600.0
    assert handle.arguments == {"q": 1}


async def test_past_task_timeout_the_server_is_asked_to_cancel_and_the_model_told(
    autojump_clock: trio.abc.Clock,
) -> None:
    server = Server([])  # never ends
    options = CallOptions(tasks=watch(server, [], timeout=30.0))
    outcome = await follow(server, TaskState("t1", EXT, "working", None, 1.0), options)
    assert outcome.kind is ErrorKind.TIMEOUT
    assert "did not finish within 30s (task_timeout)" in (outcome.error or "")
    assert server.asked[-1] == "cancel"
    assert server.asked.count("cancel") == 1


async def test_cancelling_the_run_sends_tasks_cancel(autojump_clock: trio.abc.Clock) -> None:
    server = Server([])
    with trio.move_on_after(5):
        await follow(server, TaskState("t1", EXT, "working"), CallOptions())
    assert server.asked[-1] == "cancel"


async def test_the_callers_deadline_does_not_cut_the_wait_for_the_task(autojump_clock: trio.abc.Clock) -> None:
    # The caller's deadline (a turn's, a batch's) bounded the request that created the task; the task then
    # has its own (task_timeout): a task outliving the caller's deadline still brings its result.
    server = Server([state("working", "a", OLD)] * 20 + [state("completed", None, OLD), ToolOutcome(result="late")])
    options = CallOptions(deadline=trio.current_time() + 10, tasks=watch(server, [], timeout=3600.0))
    outcome = await follow(server, TaskState("t1", OLD, "working", None, 1.0), options)
    assert outcome.result == "late"
    assert trio.current_time() > options.deadline
    assert "cancel" not in server.asked


async def test_the_wait_for_a_task_holds_the_watchs_waiting_open(autojump_clock: trio.abc.Clock) -> None:
    server = Server([state("working"), ToolOutcome(result="done")])
    inside: list[bool] = []

    @contextlib.contextmanager
    def waiting() -> Iterator[None]:
        inside.append(True)
        try:
            yield
        finally:
            inside.append(False)

    tasks = attrs.evolve(watch(server, []), waiting=waiting)
    outcome = await follow(server, TaskState("t1", EXT, "working", None, 1.0), CallOptions(tasks=tasks))
    assert outcome.result == "done"
    assert inside == [True, False]


async def test_a_poll_the_network_failed_is_tried_again_once_the_server_is_back(
    autojump_clock: trio.abc.Clock,
) -> None:
    lost = ToolOutcome(error="gone", kind=ErrorKind.SERVER_UNAVAILABLE)
    server = Server([lost, ToolOutcome(result="done")])
    outcome = await follow(server, TaskState("t1", EXT, "working"), CallOptions())
    assert outcome.result == "done"
    assert server.ready_waits == 1
    assert server.asked == ["get", "get"]


async def test_a_handshake_era_task_gets_its_result_from_tasks_result(autojump_clock: trio.abc.Clock) -> None:
    server = Server([state("working", "a", OLD), state("completed", "b", OLD), ToolOutcome(result="report")])
    outcome = await follow(server, TaskState("t1", OLD, "working"), CallOptions())
    assert outcome.result == "report"
    assert server.asked == ["get", "get", "result"]


async def test_a_handshake_era_task_that_asks_goes_to_tasks_result_and_is_not_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    asking = ToolOutcome(error="asks", kind=ErrorKind.INPUT_REQUIRED)
    server = Server([state("input_required", "which one?", OLD), asking])
    outcome = await follow(server, TaskState("t1", OLD, "working"), CallOptions())
    assert outcome.kind is ErrorKind.INPUT_REQUIRED
    assert server.asked == ["get", "result"]  # the held tasks/result answers the question; no cancel


async def test_a_task_the_server_cancelled_is_an_error_without_a_result_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    server = Server([state("cancelled", "stopped by an operator", OLD)])
    outcome = await follow(server, TaskState("t1", OLD, "working"), CallOptions())
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.error == "the task 't1' of tool 'research' was cancelled by the server: stopped by an operator"
    assert server.asked == ["get"]


async def test_an_extension_task_created_ended_is_read_with_tasks_get(autojump_clock: trio.abc.Clock) -> None:
    failed = ToolOutcome(error="the build broke", kind=ErrorKind.TOOL_ERROR)
    server = Server([failed])
    outcome = await follow(server, TaskState("t1", EXT, "failed"), CallOptions())
    assert outcome.error == "the build broke"
    assert server.asked == ["get"]


async def test_a_failed_poll_is_the_calls_error_and_nothing_is_cancelled(autojump_clock: trio.abc.Clock) -> None:
    unknown = ToolOutcome(error="Failed to retrieve task: no task (JSON-RPC error -32602)", kind=ErrorKind.TOOL_ERROR)
    server = Server([unknown])
    outcome = await follow(server, TaskState("t1", EXT, "working"), CallOptions(deadline=math.inf))
    assert outcome.error == unknown.error
    assert server.asked == ["get"]


def count(state: str, server: str = "srv") -> float:
    return labelled(TASKS, server, state)._value.get()


async def test_metrics_count_tasks_by_state_and_the_open_ones(autojump_clock: trio.abc.Clock) -> None:
    before = {state: count(state) for state in ("created", "completed", "timeout", "failed")}
    server = Server([ToolOutcome(result="done")])
    await follow(server, TaskState("t1", EXT, "working"), CallOptions())
    await follow(Server([]), TaskState("t2", EXT, "working"), CallOptions(tasks=watch(Server([]), [], timeout=5)))
    failed = ToolOutcome(error="no such task", kind=ErrorKind.TOOL_ERROR)
    await follow(Server([failed]), TaskState("t3", EXT, "working"), CallOptions())
    after = {state: count(state) for state in before}
    assert {state: after[state] - before[state] for state in before} == {
        "created": 3,
        "completed": 1,
        "timeout": 1,
        "failed": 1,
    }
    assert labelled(OPEN_TASKS, "srv")._value.get() == 0
