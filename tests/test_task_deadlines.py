"""What bounds a run's wait for a task (the 2026-07-28 task server, in process, under Trio's autojump clock):
the assistant's ``task_timeout`` and cancelling the run, not the turn's deadline (``timeouts.turn``) nor the run's
(``timeouts.run``, which stands still while the run waits on a task). The turn's deadline still bounds an
ordinary call of the same batch, and the run's still bounds the run's own work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from tests.detach_support import seen_until_detached
from tests.support import check_stream
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation.run_deadline import RunDeadline
from yao_actors.errors import ErrorKind
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.specs import RunTimeouts
from yao_actors.testing.servers import build_test_server
from yao_actors.testing.task_extension import TasksExtension
from yao_actors.testing.task_servers import build_task_server

#: Short run and turn deadlines, against tasks of many minutes.
SHORT = RunTimeouts(run=20.0, model=10.0, turn=10.0)
#: A 20-minute task.
TWENTY_MINUTES = 1200.0
GUARD = 10_000.0  # autojump time


def config(timeouts: RunTimeouts, task_timeout: float = 3600.0) -> tuple[Config, TasksExtension]:
    server, extension = build_task_server(poll_ms=60_000)  # polled once a minute: a few polls for a long task
    servers = {
        "tasks": ServerSpec("tasks", InMemoryTransport(server)),
        "test": ServerSpec("test", InMemoryTransport(build_test_server()), timeout=600.0),
    }
    assistant = AssistantSpec(
        "a", "m", ("Be brief.",), (ServerRef("tasks"), ServerRef("test")), timeouts=timeouts, task_timeout=task_timeout
    )
    return Config(servers=servers, assistants={"a": assistant}), extension


def calling(*calls: tuple[str, str], after: float = 0.0) -> FunctionModel:
    """A model making ``calls`` (name, arguments) in one turn, then answering with the tool messages it got,
    after thinking ``after`` seconds."""

    async def script(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "tool":
            await trio.sleep(after)
            said = [m["content"] for m in messages if m["role"] == "tool"]
            return "the tools said: " + " | ".join(said)
        return Completion(tool_calls=tuple(ToolCall(f"call-{i}", n, a) for i, (n, a) in enumerate(calls, 1)))

    return FunctionModel(script)


SLOW_ECHO = ("tasks__slow_echo", f'{{"text": "hello", "steps": 0, "seconds": {TWENTY_MINUTES}}}')


async def test_a_task_outliving_the_turn_and_run_timeouts_delivers_its_result(autojump_clock: trio.abc.Clock) -> None:
    cfg, extension = config(SHORT)
    started = trio.current_time()
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": calling(SLOW_ECHO)}) as runtime:
            result = await runtime.run("a", "echo it in twenty minutes")
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED, result.events[-1]
    assert trio.current_time() - started >= TWENTY_MINUTES  # far past timeouts.turn and timeouts.run
    results = [e for e in result.events if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["content"] for e in results] == ['"hello"']
    assert result.text == 'the tools said: "hello"'
    assert extension.record.ran["slow_echo"] == 1
    assert extension.record.cancelled["slow_echo"] == 0


async def test_task_timeout_still_cancels_the_task_and_the_model_is_told(autojump_clock: trio.abc.Clock) -> None:
    # task_timeout (30 minutes) is longer than the run's and the turn's deadlines: it is the one that ends the wait.
    cfg, extension = config(SHORT, task_timeout=1800.0)
    model = calling(("tasks__forever", "{}"))
    started = trio.current_time()
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": model}) as runtime:
            result = await runtime.run("a", "wait for ever")
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED
    # (the handle's deadline is wall-clock time: the real time the test took comes off the autojumped wait)
    assert 1799.0 <= trio.current_time() - started < 1800.0 + 60.0 + SHORT.run
    (tool_result,) = result.tool_results
    assert tool_result.kind is ErrorKind.TIMEOUT
    tool_message = model.calls[-1].messages[-1]
    assert tool_message["role"] == "tool"
    assert "did not finish within 1800s (task_timeout); the server was asked to cancel it" in tool_message["content"]
    assert extension.record.cancelled["forever"] == 1  # tasks/cancel reached the server


async def test_an_ordinary_call_beside_a_task_keeps_the_turns_deadline(autojump_clock: trio.abc.Clock) -> None:
    cfg, extension = config(SHORT)
    model = calling(SLOW_ECHO, ("test__sleep", '{"seconds": 100}'))
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": model}) as runtime:
            result = await runtime.run("a", "a task and a slow call")
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED
    by_call = {r.call_id: r for r in result.tool_results}
    assert by_call["call-1"].result == "hello"
    assert by_call["call-2"].kind is ErrorKind.TIMEOUT
    assert by_call["call-2"].error == "the batch deadline expired before the call finished"
    assert by_call["call-2"].duration == SHORT.turn  # cut at the turn's deadline, not at the task's end
    results = [e["toolCallId"] for e in result.events if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["call-2", "call-1"]  # the cut call is told at once, the task's when it ends
    assert extension.record.cancelled["slow_echo"] == 0


async def test_the_run_deadline_still_bounds_the_runs_own_work_after_a_task(autojump_clock: trio.abc.Clock) -> None:
    # The run's deadline stood still during the task; after it, a model that takes longer than what is left of it
    # (the run had used almost none before the task) ends the run with run_timeout.
    cfg, _extension = config(RunTimeouts(run=20.0, model=100.0, turn=10.0))
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": calling(SLOW_ECHO, after=50.0)}) as runtime:
            result = await runtime.run("a", "echo it, then think too long")
    check_stream(result.events)
    assert result.code == "run_timeout"
    assert [e["content"] for e in result.events if e["type"] == "TOOL_CALL_RESULT"] == ['"hello"']


async def test_a_client_may_detach_during_a_long_task_and_resume_the_run_later(autojump_clock: trio.abc.Clock) -> None:
    # detach_grace (30 s by default) does not run while the run waits on its task: the run is still there to
    # resume ten minutes later, and the resume sees the task's one result and the run's one terminal event.
    cfg, extension = config(SHORT)
    assert cfg.service.detach_grace < 600
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": calling(SLOW_ECHO)}) as runtime:
            seen = await seen_until_detached(
                runtime, "echo it in twenty minutes", "TOOL_CALL_START", thread_id="t", run_id="r1"
            )
            await trio.sleep(600.0)  # the client is away for ten minutes, far past detach_grace
            assert extension.record.cancelled["slow_echo"] == 0
            async with runtime.open_resume("r1", after_seq=seen[-1]["seq"]) as resumed:
                rest = [event async for event in resumed]
    everything = seen + rest
    check_stream(everything)
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert [e["content"] for e in everything if e["type"] == "TOOL_CALL_RESULT"] == ['"hello"']
    assert [e["type"] for e in everything if e["type"] in ("RUN_FINISHED", "RUN_ERROR")] == ["RUN_FINISHED"]
    assert everything[-1]["result"]["text"] == 'the tools said: "hello"'
    assert extension.record.ran["slow_echo"] == 1


async def test_the_run_deadline_stands_still_while_any_of_several_task_waits_lasts(
    autojump_clock: trio.abc.Clock,
) -> None:
    deadline = RunDeadline.after(20.0)
    told: list[int] = []
    deadline.on_wait = told.append
    with deadline.scope:
        await trio.sleep(5.0)  # the run's own work: 15 s left

        async def wait_on_task(seconds: float) -> None:
            with deadline.waiting():
                await trio.sleep(seconds)

        async with trio.open_nursery() as nursery:  # two tasks, overlapping: 100 s and 300 s
            nursery.start_soon(wait_on_task, 100.0)
            nursery.start_soon(wait_on_task, 300.0)
        assert deadline.scope.deadline == trio.current_time() + 15.0
        await trio.sleep(14.0)  # still within the run's deadline
        assert told == [1, 1, -1, -1]
        await trio.sleep(2.0)
        raise AssertionError("the run's deadline passes the second after the 15 s it had left")
    assert deadline.scope.cancelled_caught
    assert trio.current_time() == 5.0 + 300.0 + 15.0
