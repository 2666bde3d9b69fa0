"""A run whose tool call becomes a task (the 2026-07-28 task server, in process): the task's status messages are
the call's ``tool_progress`` events, its result reaches the model once; ``task_timeout`` asks the server to cancel
the task and tells the model it did not finish; cancelling the run cancels the task at the server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import trio

from tests.support import check_stream
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing.task_extension import TasksExtension
from yao_actors.testing.task_servers import build_task_server

GUARD = 60


def config(task_timeout: float = 3600.0) -> tuple[Config, TasksExtension]:
    server, extension = build_task_server()
    servers = {"tasks": ServerSpec("tasks", InMemoryTransport(server))}
    assistant = AssistantSpec("a", "m", ("Be brief.",), (ServerRef("tasks"),), task_timeout=task_timeout)
    return Config(servers=servers, assistants={"a": assistant}), extension


def calling(tool: str, arguments: str) -> FunctionModel:
    def script(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return f"the tool said: {messages[-1]['content']}"
        return Completion(tool_calls=(ToolCall("call-1", f"tasks__{tool}", arguments),))

    return FunctionModel(script)


async def test_a_task_streams_its_status_as_progress_and_its_result_reaches_the_model_once() -> None:
    cfg, extension = config()
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": calling("slow_echo", '{"text": "hello"}')}) as runtime:
            result = await runtime.run("a", "echo it slowly")
    check_stream(result.events)
    progress = [e["value"]["message"] for e in result.events if e.get("name") == "tool_progress"]
    steps = ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    # At most one status message a second, the latest kept: the first at once, the last never lost, in order.
    assert progress[0] == steps[0]
    assert progress[-1] == steps[-1]
    assert progress == sorted(set(progress), key=steps.index)
    assert all(e["value"]["toolCallId"] == "call-1" for e in result.events if e.get("name") == "tool_progress")
    results = [e for e in result.events if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert results[0]["content"] == '"hello"'  # the result as the model sees it: compact JSON
    assert result.text == 'the tool said: "hello"'
    assert extension.record.ran["slow_echo"] == 1


async def test_past_task_timeout_the_task_is_cancelled_and_the_model_told(autojump_clock: trio.abc.Clock) -> None:
    cfg, extension = config(task_timeout=30.0)
    model = calling("forever", "{}")
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": model}) as runtime:
            result = await runtime.run("a", "wait for ever")
    tool_message = model.calls[-1].messages[-1]
    assert tool_message["role"] == "tool"
    assert "did not finish within 30s (task_timeout); the server was asked to cancel it" in tool_message["content"]
    assert extension.record.cancelled["forever"] == 1
    assert result.text.startswith("the tool said: Error:")


async def test_cancelling_the_run_cancels_its_task_at_the_server() -> None:
    cfg, extension = config()
    with trio.fail_after(GUARD):
        async with (
            open_runtime(cfg, models={"m": calling("forever", "{}")}) as runtime,
            runtime.open_run("a", "wait for ever") as stream,
        ):
            async for event in stream:
                if event.get("name") == "tool_progress":  # the task is created, stored and polled
                    stream.cancel()
                if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    break
    assert extension.record.ran["forever"] == 1
    assert extension.record.cancelled["forever"] == 1


def test_assistant_task_timeout_defaults_to_an_hour() -> None:
    assert attrs.fields(AssistantSpec).task_timeout.default == 3600.0


async def test_a_task_that_asks_ends_the_run_with_an_interrupt_and_the_resume_answers_through_the_task() -> None:
    cfg, extension = config()
    with trio.fail_after(GUARD):
        async with open_runtime(cfg, models={"m": calling("ask", '{"question": "Which branch?"}')}) as runtime:
            asked = await runtime.run("a", "ask me", thread_id="t")
            check_stream(asked.events)
            assert asked.outcome is Outcome.INTERRUPT
            (interrupt,) = asked.events[-1]["outcome"]["interrupts"]
            payload = {"action": "accept", "content": {"answer": "main"}}
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
            answered = await runtime.run("a", [], thread_id="t", resume=resume)
    assert interrupt["reason"] == "input_required"
    assert interrupt["message"] == "Which branch?"
    assert interrupt["toolCallId"] == "call-1"
    check_stream(answered.events)
    results = [e for e in answered.events if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["content"] for e in results] == ['"you said: main"']
    assert answered.text == 'the tool said: "you said: main"'
    assert extension.record.ran["ask"] == 1  # the same task, answered: not run again
    assert extension.record.cancelled["ask"] == 0
