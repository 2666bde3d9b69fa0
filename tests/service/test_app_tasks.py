"""An app's ``tools/call`` answered with a task that asks the user: nobody can answer an app's call, so the call is
refused and the task is cancelled at the server, not left waiting there."""

from __future__ import annotations

from typing import Any

import trio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp_types import CallToolRequestParams

from tests.apps_support import build_app_server
from tests.service.agui_support import post_agui, run_input
from tests.service.support import running_service
from tests.service.test_app_proxy import ALICE, AS_ALICE, BOB, proxied, shows
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, ServiceSpec
from yao_actors.runtime import open_runtime
from yao_actors.testing import FunctionModel
from yao_actors.testing.task_extension import TaskIdParams
from yao_actors.tools.task_wire import TASKS_EXTENSION

NOW = "2026-12-06T12:00:00Z"


class Asking(Extension):
    """Answers ``app_only`` with task ``t-ask``, which asks the user a question; remembers the cancels."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def methods(self) -> tuple[MethodBinding, ...]:
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name != "app_only":
            return await call_next(ctx)
        return {"resultType": "task", "taskId": "t-ask", "status": "working", "createdAt": NOW, "lastUpdatedAt": NOW}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        form = {"type": "object", "properties": {"answer": {"type": "string"}}}
        ask = {"method": "elicitation/create", "params": {"message": "Which?", "requestedSchema": form}}
        return {
            "taskId": params.taskId,
            "status": "input_required",
            "createdAt": NOW,
            "lastUpdatedAt": NOW,
            "inputRequests": {"answer": ask},
        }

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        self.cancelled.append(params.taskId)
        return {}


async def test_an_apps_call_whose_task_asks_the_user_is_refused_and_the_task_cancelled() -> None:
    asking = Asking()
    server = build_app_server(extensions=[asking])
    spec = ServerSpec("apps", InMemoryTransport(server), protocol="2026-07-28", tasks="auto")
    assistant = AssistantSpec(id="default", model="m", servers=(ServerRef("apps"),))
    config = Config(
        servers={"apps": spec}, assistants={"default": assistant}, service=ServiceSpec(max_frame_bytes=65536)
    )
    with trio.fail_after(20):
        async with (
            open_runtime(config, models={"m": FunctionModel(shows)}) as runtime,
            running_service(runtime, tokens={"alice": ALICE, "bob": BOB}, max_frame_bytes=65536) as service,
        ):
            await post_agui(service.port, run_input("show 21"), headers=AS_ALICE)
            body = proxied("tools/call", {"name": "app_only", "arguments": {"step": 1}})
            response = await post_agui(service.port, body, headers=AS_ALICE)
    assert response.status == 200, response.body
    finished = response.events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["result"]["error"] == "tools/call 'app_only': input_required: the server asks the user for input"
    assert asking.cancelled == ["t-ask"]
