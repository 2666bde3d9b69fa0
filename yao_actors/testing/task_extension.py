"""The server side of the 2026-07-28 tasks extension, for test servers: calls answered with tasks, and their polls.

The extension (``io.modelcontextprotocol/tasks``): a client that declares it in a request's
``_meta["io.modelcontextprotocol/clientCapabilities"].extensions`` may be answered ``resultType: "task"``
(a task's id, ``status``, ``pollIntervalMs``) instead of a tool result; it then polls ``tasks/get``, whose
answer carries the final ``result`` (``completed``) or JSON-RPC ``error`` (``failed``), or the task's
``inputRequests`` (``input_required``), which ``tasks/update`` answers with ``inputResponses``;
``tasks/cancel`` asks the server to stop. Over streamable HTTP every ``tasks/*`` request carries the
header ``Mcp-Name: <taskId>``; :class:`TasksExtension` refuses one that does not (``HEADER_MISMATCH``).

What each task does is its tool's body (:data:`Body`); :mod:`yao_actors.testing.task_servers` holds the tools.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolRequestParams, RequestParams
from mcp_types.jsonrpc import HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import ConfigDict

from yao_actors.testing.task_record import TaskRecord

#: The extension's identifier, in capabilities and ``_meta``.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: Where a 2026-07-28 request carries the client's capabilities.
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"

TERMINAL = frozenset({"completed", "failed", "cancelled"})


class TaskIdParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``: the task's id."""

    model_config = ConfigDict(extra="allow")
    taskId: str


class TaskUpdateParams(TaskIdParams):
    """``tasks/update``: the task's id and answers to its ``inputRequests`` by key."""

    inputResponses: dict[str, Any]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


@attrs.define(eq=False)
class ServerTask:
    """One task: its state as ``tasks/get`` shows it, and what its body waits on."""

    task_id: str
    tool: str
    status: str = "working"
    message: str | None = None
    created_at: str = attrs.field(factory=_now)
    updated_at: str = attrs.field(factory=_now)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] = attrs.field(factory=dict)
    answers: dict[str, Any] = attrs.field(factory=dict)
    answered: anyio.Event = attrs.field(factory=anyio.Event)
    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)
    polled: anyio.Event = attrs.field(factory=anyio.Event)

    async def next_poll(self) -> None:
        """Wait until a client has seen the task as it is now (its next ``tasks/get``)."""
        await self.polled.wait()

    def seen(self) -> None:
        self.polled.set()
        self.polled = anyio.Event()

    def move(self, status: str, message: str | None = None) -> None:
        self.status, self.message, self.updated_at = status, message, _now()

    def view(self, poll_ms: int) -> dict[str, Any]:
        """The task as ``tasks/get`` (and the ``CreateTaskResult``) shows it."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": None,
            "pollIntervalMs": poll_ms,
        }
        if self.message is not None:
            task["statusMessage"] = self.message
        if self.status == "completed":
            task["result"] = self.result
        elif self.status == "failed":
            task["error"] = self.error
        elif self.status == "input_required":
            task["inputRequests"] = dict(self.input_requests)
        return task


Body = Callable[[ServerTask, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""What a tool's task does: given its task and the call's arguments, the task's result (an ``MCPError`` fails it)."""


class TasksExtension(Extension):
    """The server side of ``io.modelcontextprotocol/tasks``: answers task tools' calls with tasks, serves
    ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` from one store for the whole process (not per
    session: any connection that knows a task's id may poll it, as the extension intends).

    ``bodies`` are the task tools by name: a call of one becomes a task when the client declares the
    extension, and otherwise gets the tool's inline answer, except for the ``task_only`` tools, which are then
    refused with ``-32021`` (missing required client capability)."""

    identifier = TASKS_EXTENSION

    def __init__(
        self, bodies: Mapping[str, Body], record: TaskRecord, poll_ms: int, *, task_only: Collection[str] = ()
    ) -> None:
        self.bodies = dict(bodies)
        self.task_only = frozenset(task_only)
        self.record = record
        self.poll_ms = poll_ms
        self.tasks: dict[str, ServerTask] = {}
        self.polls = 0
        """The ``tasks/get`` requests answered (a benchmark counts its polls by them)."""
        self.task_group: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def serving(self, _server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: the task group the tasks' bodies run in, cancelled as the server stops."""
        async with anyio.create_task_group() as group:
            self.task_group = group
            try:
                yield {}
            finally:
                self.task_group = None
                group.cancel_scope.cancel()

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/update", TaskUpdateParams, self._update),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name not in self.bodies:
            return await call_next(ctx)
        if not _declares_tasks(ctx):
            if params.name in self.task_only:
                raise missing_capability(params.name)
            return await call_next(ctx)  # the tool's own inline answer
        if self.task_group is None:
            raise MCPError(INTERNAL_ERROR, "the task server's task group is not running")
        task = ServerTask(task_id=secrets.token_urlsafe(24), tool=params.name)
        self.tasks[task.task_id] = task  # stored before the answer: a tasks/get for it resolves at once
        await self.task_group.start(self._run, task, dict(params.arguments or {}))  # its first status is set
        return {"resultType": "task", **task.view(self.poll_ms)}

    async def _run(
        self, task: ServerTask, arguments: Mapping[str, Any], *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        self.record.write("ran", task.tool, task.task_id)
        task_status.started()  # the body runs on to its first wait before the caller answers
        with task.scope:
            try:
                result = await self.bodies[task.tool](task, arguments)
            except MCPError as error:
                task.error = {"code": error.code, "message": error.error.message}
                task.move("failed", f"the task failed: {error.error.message}")
                self.record.write("failed", task.tool, task.task_id)
                return
            task.result = result
            task.move("completed", "done")
            self.record.write("completed", task.tool, task.task_id)
            return
        task.move("cancelled", "cancelled at the client's request")
        self.record.write("cancelled", task.tool, task.task_id)

    def _task(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> ServerTask:
        _check_routing(ctx, params.taskId)
        if not _declares_tasks(ctx):
            raise missing_capability(ctx.method)
        task = self.tasks.get(params.taskId)
        if task is None:
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: no task {params.taskId!r}")
        return task

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        task = self._task(ctx, params)
        self.polls += 1
        view = task.view(self.poll_ms)
        task.seen()
        return view

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: TaskUpdateParams) -> HandlerResult:
        task = self._task(ctx, params)
        for key, response in params.inputResponses.items():
            if key in task.input_requests:  # keys not outstanding are ignored, as the extension says
                del task.input_requests[key]
                task.answers[key] = response
        if not task.input_requests and task.answers:
            task.answered.set()
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> HandlerResult:
        task = self._task(ctx, params)
        if task.status not in TERMINAL:
            task.scope.cancel()
        return {}


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request (its ``_meta``, or the connection's capabilities) declares the extension."""
    meta = ctx.meta
    fields = meta if isinstance(meta, dict) else (meta.model_dump(by_alias=True) if meta is not None else {})
    declared = fields.get(CLIENT_CAPABILITIES_META)
    if isinstance(declared, Mapping) and TASKS_EXTENSION in (declared.get("extensions") or {}):
        return True
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


def _check_routing(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """Over HTTP, a ``tasks/*`` request names its task in ``Mcp-Name`` (so a balancer can route it)."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return  # stdio: no headers
    named = headers.get("mcp-name")
    if named != task_id:
        raise MCPError(
            HEADER_MISMATCH, f"{ctx.method}: the Mcp-Name header ({named!r}) must be the task's id ({task_id!r})"
        )


def missing_capability(what: str) -> MCPError:
    """The error for a call of ``what`` that cannot be answered without the extension the client did not declare."""
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the client to declare the {TASKS_EXTENSION} extension",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )
