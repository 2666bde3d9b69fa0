"""The wire of MCP tasks, both designs: the shapes a server answers with and the requests a client sends.

- **2026-07-28, the tasks extension** (``io.modelcontextprotocol/tasks``): the client declares the extension in
  every request's ``_meta`` capabilities (the SDK stamps the capabilities of the client's extensions,
  :class:`TasksExtension`); a server may then answer ``tools/call`` with ``resultType: "task"``
  (:class:`ExtensionTask`, a :class:`~mcp.client.extension.ResultClaim` of the SDK's hook). ``tasks/get``
  (:class:`DetailedTask`) carries the status, the server's ``inputRequests``, and at the end the result or the
  JSON-RPC error; ``tasks/update`` answers the input requests, ``tasks/cancel`` asks the server to stop. Each of
  the three names the task in ``Mcp-Name`` over HTTP (the SDK mirrors a request's ``name_param`` into it).
- **2025-11-25 tasks**: the client asks for a task with a ``task`` parameter of ``tools/call`` (only for a tool
  whose ``execution.taskSupport`` allows one, on a server whose capabilities offer ``tasks.requests.tools.call``);
  the server answers ``CreateTaskResult``; ``tasks/get`` says the status, ``tasks/result`` gives the result (and
  carries the server's questions while the task waits for input), ``tasks/cancel`` stops it.

Everything here is read as untrusted: unknown fields are ignored, a malformed answer is a validation error the
caller turns into the call's ``tool_error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import mcp_types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import Field

#: The extension's identifier, in capabilities and in ``_meta``.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

#: The longest task id either design takes (characters; an empty one is refused too).
MAX_TASK_ID: Final = 512

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]


class ExtensionTask(Result):
    """A 2026-07-28 ``tools/call`` answered with a task (``resultType: "task"``): the task's first state."""

    result_type: Literal["task"] = "task"
    task_id: str = Field(min_length=1, max_length=MAX_TASK_ID)
    status: TaskStatus
    status_message: str | None = None
    poll_interval_ms: float | None = None
    ttl_ms: float | None = None


class DetailedTask(Result):
    """A 2026-07-28 ``tasks/get`` answer: the task now, with its input requests, result or error."""

    task_id: str = Field(min_length=1, max_length=MAX_TASK_ID)
    status: TaskStatus
    status_message: str | None = None
    poll_interval_ms: float | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskIdParams(RequestParams):
    task_id: str


class UpdateTaskParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    """2026-07-28 ``tasks/get`` (``Mcp-Name: <taskId>`` over HTTP)."""

    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTask(Request[UpdateTaskParams, Literal["tasks/update"]]):
    """2026-07-28 ``tasks/update`` with the user's ``inputResponses``."""

    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    """2026-07-28 ``tasks/cancel``: asks the server to stop (never ``notifications/cancelled`` for a task)."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class TaskAnswered(Exception):
    """A ``tools/call`` made through the SDK's own driver was answered with a task: the driver does not follow
    it, the run does (it stores the task first)."""

    def __init__(self, task: ExtensionTask) -> None:
        super().__init__(f"answered with task {task.task_id!r}")
        self.task = task


async def _hand_back(task: ExtensionTask, context: ClaimContext) -> CallToolResult:
    """The claim's resolver: hand the task back to the server actor (:class:`TaskAnswered`)."""
    raise TaskAnswered(task)


class TasksExtension(ClientExtension):
    """The client side of ``io.modelcontextprotocol/tasks`` on the SDK's extension hook: declares the extension
    (so the SDK stamps it in each request's capabilities) and claims ``resultType: "task"``."""

    identifier = TASKS_EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=ExtensionTask, resolve=_hand_back),)


def handshake_call(name: str, arguments: dict[str, Any], ttl_ms: int | None) -> mcp_types.CallToolRequest:
    """A 2025-11-25 ``tools/call`` asking for a task."""
    params = mcp_types.CallToolRequestParams(name=name, arguments=arguments, task=mcp_types.TaskMetadata(ttl=ttl_ms))
    return mcp_types.CallToolRequest(params=params)


def task_support(tool: Any) -> str:
    """A tool's ``execution.taskSupport``: ``"required"``, ``"optional"`` or ``"forbidden"`` (also when absent)."""
    execution = getattr(tool, "execution", None)
    support = getattr(execution, "task_support", None)
    return support if support in ("required", "optional") else "forbidden"


def is_task_answer(value: Any) -> bool:
    """Whether an answer a ``tools/call`` could not be read as is a task (either design's shape)."""
    if not isinstance(value, dict):
        return False
    task = value.get("task")
    return value.get("resultType") == "task" or (isinstance(task, dict) and "taskId" in task)
