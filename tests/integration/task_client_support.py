"""A bare client of the tasks extension for the tests of the task server itself: it declares the extension,
takes the ``resultType: "task"`` answer as it is (no polling of its own), and sends ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` by hand through the SDK's session (which sets ``Mcp-Name`` over HTTP)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import trio
from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, Request, Result
from pydantic import ConfigDict

from yao_actors.testing.processes import TASK_SERVER_COMMAND
from yao_actors.testing.task_extension import TASKS_EXTENSION, TaskIdParams, TaskUpdateParams
from yao_actors.testing.task_record import RECORD_ENV


class CreatedTask(Result):
    """A ``CreateTaskResult``: ``resultType: "task"`` and the task."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    taskId: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class UpdateTask(Request[TaskUpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: TaskUpdateParams
    name_param: ClassVar[str | None] = "taskId"


class AnyResult(Result):
    model_config = ConfigDict(extra="allow")


async def _not_resolved(created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
    raise AssertionError("these tests poll by hand")


class BareTasks(ClientExtension):
    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=_not_resolved),)


class TaskClient:
    """One connection to a task server."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def start(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool``; the server's answer as a mapping (a task or a tool result)."""
        answer = await self.client.session.call_tool(tool, arguments, allow_claimed=True)
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def get(self, task_id: str) -> dict[str, Any]:
        result = await self.client.session.send_request(GetTask(params=TaskIdParams(taskId=task_id)), AnyResult)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def update(self, task_id: str, responses: dict[str, Any]) -> None:
        params = TaskUpdateParams(taskId=task_id, inputResponses=responses)
        await self.client.session.send_request(UpdateTask(params=params), AnyResult)

    async def cancel(self, task_id: str) -> None:
        await self.client.session.send_request(CancelTask(params=TaskIdParams(taskId=task_id)), AnyResult)

    async def until(self, task_id: str, *statuses: str) -> dict[str, Any]:
        """Poll at the server's interval until the task's status is one of ``statuses``; every answer seen."""
        while True:
            task = await self.get(task_id)
            if task["status"] in statuses:
                return task
            await trio.sleep(task.get("pollIntervalMs", 50) / 1000)  # the server's own pace, as a client polls


@asynccontextmanager
async def open_task_client(
    target: str | None = None, *, tasks: bool = True, record: Path | None = None
) -> AsyncIterator[TaskClient]:
    """A 2026-07-28 connection to the task server at ``target`` (a URL), or to one over stdio (``None``; its
    record file ``record``, through the environment); ``tasks=False``: a client that does not declare the
    extension."""
    env = {**os.environ, RECORD_ENV: str(record)} if record is not None else None
    command, *args = TASK_SERVER_COMMAND
    server: Any = target or StdioServerParameters(command=command, args=args, env=env)
    extensions = [BareTasks()] if tasks else []
    async with Client(server, mode="2026-07-28", extensions=extensions) as client:
        yield TaskClient(client)
