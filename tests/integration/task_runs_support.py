"""What the tests of runs waiting on an MCP task (the tasks-extension test server over streamable HTTP, the service
as ``server.py`` processes) share: a model that calls one task tool, and reading a run until its task is stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.service.support import receive
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply


def task_caller(
    tool: str, arguments: dict[str, Any], answer: Callable[[str], str]
) -> Callable[[RecordedRequest], Reply]:
    """A model that calls ``tasks__TOOL`` with ``arguments``, then answers ``answer(the tool's result)``."""

    def model(request: RecordedRequest) -> Reply:
        last = request.body["messages"][-1]
        if last["role"] == "tool":
            return Reply(text=answer(last["content"]))
        return Reply(tool_calls=(FakeToolCall(f"tasks__{tool}", json.dumps(arguments), "c1"),))

    return model


async def until_task_stored(ws: Any, run_id: str) -> list[dict[str, Any]]:
    """Read the run's events until its task's first status message: it is shown once stored, and the task's handle
    was stored before it (durable before visible)."""
    seen: list[dict[str, Any]] = []
    while True:
        event = await receive(ws)
        if event.get("runId") != run_id:
            continue
        seen.append(event)
        assert event["type"] not in ("RUN_FINISHED", "RUN_ERROR"), seen
        if event["type"] == "CUSTOM" and event["name"] == "tool_progress":
            return seen
