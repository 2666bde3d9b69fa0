"""MCP Apps and tasks: a call of a tool with an interface (``_meta.ui.resourceUri``) that its server answers with
a task is followed, once the task ends, by the same ``ACTIVITY_SNAPSHOT`` after its ``TOOL_CALL_RESULT`` as a call
answered at once (the 2026-07-28 task server, in process)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from tests.support import app_activity_after_result, check_stream
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation.app_requests import AppRequest, AppRequestRefused
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.specs import RunTimeouts
from yao_actors.testing.task_servers import SHOW_APP_URI, build_task_server
from yao_actors.tools.apps import server_hash

GUARD = 60


def showing(value: int, gate: pathlib.Path | None) -> FunctionModel:
    arguments = json.dumps({"value": value} | ({} if gate is None else {"gate": str(gate)}))

    def script(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "tool":
            return "shown"
        return Completion(tool_calls=(ToolCall("call-1", "tasks__show_later", arguments),))

    return FunctionModel(script)


async def test_a_task_of_a_tool_with_an_interface_is_followed_by_its_activity(tmp_path: pathlib.Path) -> None:
    server, extension = build_task_server()
    spec = ServerSpec("tasks", InMemoryTransport(server))
    assistant = AssistantSpec("a", "m", ("Be brief.",), (ServerRef("tasks"),))
    config = Config(servers={"tasks": spec}, assistants={"a": assistant})
    gate = tmp_path / "gate"
    events: list[dict[str, Any]] = []
    with trio.fail_after(GUARD):
        async with (
            open_runtime(config, models={"m": showing(21, gate)}) as runtime,
            runtime.open_run("a", "show 21") as stream,
        ):
            async for event in stream:
                events.append(event)
                if event.get("name") == "tool_progress":  # the task is created and polled: let it end
                    gate.touch()
    check_stream(events)
    assert extension.record.ran["show_later"] == 1  # it was a task
    assert next(e["value"]["message"] for e in events if e.get("name") == "tool_progress") == "preparing the view"
    _, activity = app_activity_after_result(events)
    content = activity["content"]
    assert content.pop("result") == {
        "content": [{"type": "text", "text": '{"value": 21, "double": 42}'}],
        "structuredContent": {"value": 21, "double": 42},
        "isError": False,
    }
    assert content == {
        "resourceUri": SHOW_APP_URI,
        "serverHash": server_hash(spec),
        "serverId": "tasks",
        "toolInput": {"value": 21, "gate": str(gate)},
    }
    assert [event["type"] for event in events].count("ACTIVITY_SNAPSHOT") == 1
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_an_apps_call_that_becomes_a_task_is_bounded_by_the_turn(autojump_clock: trio.abc.Clock) -> None:
    # A run's call waits for its task up to task_timeout; an app's request is answered within timeouts.turn, so
    # a task its call is answered with is cancelled at the server past the turn, and the app told so.
    server, extension = build_task_server()
    spec = ServerSpec("tasks", InMemoryTransport(server))
    assistant = AssistantSpec("a", "m", ("Be brief.",), (ServerRef("tasks"),), timeouts=RunTimeouts(turn=10.0))
    config = Config(servers={"tasks": spec}, assistants={"a": assistant})
    with trio.fail_after(GUARD):
        async with open_runtime(config, models={"m": showing(21, None)}) as runtime:
            shown = await runtime.run("a", "show 21", thread_id="t1")
            assert "ACTIVITY_SNAPSHOT" in [event["type"] for event in shown.events]
            request = AppRequest("t1", "tools/call", {"name": "forever", "arguments": {}}, "tasks")
            started = trio.current_time()
            with pytest.raises(AppRequestRefused) as refused:
                await runtime.app_request(request)
    assert str(refused.value) == "tools/call 'forever': timeout: no answer within 10s"
    assert trio.current_time() - started < 10.0 + 1.0
    assert extension.record.ran["forever"] == 1
    assert extension.record.cancelled["forever"] == 1  # tasks/cancel reached the server
