"""An MCP server that answers long tool calls with tasks, as the 2026-07-28 tasks extension says.

The extension (``io.modelcontextprotocol/tasks``): a client that declares it in a request's
``_meta["io.modelcontextprotocol/clientCapabilities"].extensions`` may be answered ``resultType: "task"``
(a task's id, ``status``, ``pollIntervalMs``) instead of a tool result; it then polls ``tasks/get``, whose
answer carries the final ``result`` (``completed``) or JSON-RPC ``error`` (``failed``), or the task's
``inputRequests`` (``input_required``), which ``tasks/update`` answers with ``inputResponses``;
``tasks/cancel`` asks the server to stop. Over streamable HTTP every ``tasks/*`` request carries the
header ``Mcp-Name: <taskId>``; this server refuses one that does not (``HEADER_MISMATCH``). A client
that did not declare the extension gets plain results (``slow_echo``, ``task_fail``), or for tools that
cannot answer without a task (``ask``, ``forever``) the error ``-32021`` (missing required client capability).

``build_task_server()`` returns a fresh ``MCPServer``; ``python -m yao_actors.testing.task_servers`` serves
it over stdio, or over streamable HTTP with ``--http`` (printing ``LISTENING http://HOST:PORT/mcp``).

Tools (each call a client allows becomes a task):

- ``slow_echo(text, steps=3, gate=None, seconds=0)``: goes through ``steps`` status messages
  (``"step i of n"``, the next one after a client's ``tasks/get`` has seen this one), waits until the file
  ``gate`` exists (when given) and ``seconds`` have passed, then completes with ``text``.
- ``task_fail(message)``: a task that fails with the JSON-RPC error ``-32603`` ``message``.
- ``ask(question, gate=None)``: a task that (once the file ``gate`` exists, when given) goes ``input_required``
  with one elicitation (``{"answer": string}``) under the key ``answer``, then completes with
  ``"you said: <answer>"`` (or ``"declined"``).
- ``forever()``: a task that never ends on its own; cancelling it is all that stops it.
- ``show_later(value, gate=None)``: a tool with an interface (MCP Apps: ``_meta.ui.resourceUri`` is
  :data:`SHOW_APP_URI`, served as a ``ui://`` resource) whose task waits for ``gate`` (when given), then completes
  with ``{"value": value, "double": 2 * value}`` (text and ``structuredContent``).
- ``task_stats()`` (never a task): how many times each tool's task body ran, how many were cancelled, and how
  many ``tasks/get`` requests the server answered (``polls``).

Every body that starts, ends, or is cancelled appends a JSON line (``{"event": "ran" | "completed" |
"failed" | "cancelled", "tool", "task"}``) to the record file (``--record PATH`` or the environment
variable ``YAO_TASK_SERVER_RECORD``): it outlives any client, so a test reads there how often a task ran
(:func:`read_task_record`).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import pathlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types import CallToolRequestParams, RequestParams
from mcp_types.jsonrpc import HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import ConfigDict

from yao_actors.config.module_servers import keeping_root_logging
from yao_actors.testing.servers import run_server, serving_options

#: The extension's identifier, in capabilities and ``_meta``.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: Where a 2026-07-28 request carries the client's capabilities.
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
#: The environment variable naming the record file (``--record`` wins).
RECORD_ENV = "YAO_TASK_SERVER_RECORD"
#: Tools that answer only with a task.
TASK_ONLY_TOOLS = frozenset({"ask", "forever"})
#: Tools whose calls become tasks when the client allows.
TASK_TOOLS = frozenset({"slow_echo", "task_fail", "show_later", *TASK_ONLY_TOOLS})
#: The interface (MCP Apps) of ``show_later``.
SHOW_APP_URI = "ui://tasks/show.html"

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


class TaskRecord:
    """The append-only record file of task bodies (nothing when ``path`` is ``None``), and the counts."""

    def __init__(self, path: pathlib.Path | None) -> None:
        self.path = path
        self.ran: collections.Counter[str] = collections.Counter()
        self.cancelled: collections.Counter[str] = collections.Counter()

    def write(self, event: str, task: ServerTask) -> None:
        if event == "ran":
            self.ran[task.tool] += 1
        elif event == "cancelled":
            self.cancelled[task.tool] += 1
        if self.path is not None:
            line = json.dumps({"event": event, "tool": task.tool, "task": task.task_id}) + "\n"
            with self.path.open("a", encoding="utf-8") as file:
                file.write(line)
                file.flush()


def read_task_record(path: pathlib.Path) -> list[dict[str, Any]]:
    """The lines a task server wrote to its record file (none if it wrote nothing yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


Body = Callable[[ServerTask, Mapping[str, Any]], Awaitable[dict[str, Any]]]


class TasksExtension(Extension):
    """The server side of ``io.modelcontextprotocol/tasks``: answers task tools' calls with tasks, serves
    ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` from one store for the whole process (not per
    session: any connection that knows a task's id may poll it, as the extension intends)."""

    identifier = TASKS_EXTENSION

    def __init__(self, bodies: Mapping[str, Body], record: TaskRecord, poll_ms: int) -> None:
        self.bodies = dict(bodies)
        self.record = record
        self.poll_ms = poll_ms
        self.tasks: dict[str, ServerTask] = {}
        self.polls = 0
        """The ``tasks/get`` requests answered (a benchmark counts its polls by them)."""
        self.task_group: anyio.abc.TaskGroup | None = None

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/update", TaskUpdateParams, self._update),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if params.name not in TASK_TOOLS:
            return await call_next(ctx)
        if not _declares_tasks(ctx):
            if params.name in TASK_ONLY_TOOLS:
                raise _missing_capability(params.name)
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
        self.record.write("ran", task)
        task_status.started()  # the body runs on to its first wait before the caller answers
        with task.scope:
            try:
                result = await self.bodies[task.tool](task, arguments)
            except MCPError as error:
                task.error = {"code": error.code, "message": error.error.message}
                task.move("failed", f"the task failed: {error.error.message}")
                self.record.write("failed", task)
                return
            task.result = result
            task.move("completed", "done")
            self.record.write("completed", task)
            return
        task.move("cancelled", "cancelled at the client's request")
        self.record.write("cancelled", task)

    def _task(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> ServerTask:
        _check_routing(ctx, params.taskId)
        if not _declares_tasks(ctx):
            raise _missing_capability(ctx.method)
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


def _missing_capability(what: str) -> MCPError:
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the client to declare the {TASKS_EXTENSION} extension",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def _text(text: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


async def _wait_for_gate(gate: str | None) -> None:
    """Wait until the file ``gate`` exists (a test creates it when the task may end)."""
    if gate is None:
        return
    path = anyio.Path(gate)
    while not await path.exists():  # noqa: ASYNC110 (another process makes the file: there is nothing to wait on)
        await anyio.sleep(0.02)


async def _slow_echo(task: ServerTask, arguments: Mapping[str, Any]) -> dict[str, Any]:
    steps = int(arguments.get("steps", 3))
    for step in range(1, steps + 1):
        task.move("working", f"step {step} of {steps}")
        await task.next_poll()  # each status message is seen by one tasks/get
    await _wait_for_gate(arguments.get("gate"))
    await anyio.sleep(float(arguments.get("seconds", 0)))
    return _text(str(arguments.get("text", "")))


async def _task_fail(task: ServerTask, arguments: Mapping[str, Any]) -> dict[str, Any]:
    task.move("working", "about to fail")
    raise MCPError(INTERNAL_ERROR, str(arguments.get("message", "the task failed")))


async def _ask(task: ServerTask, arguments: Mapping[str, Any]) -> dict[str, Any]:
    question = str(arguments.get("question", "What is your answer?"))
    if arguments.get("gate") is not None:
        task.move("working", "thinking before asking")
        await _wait_for_gate(arguments.get("gate"))
    task.input_requests["answer"] = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": question,
            "requestedSchema": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
            },
        },
    }
    task.move("input_required", "waiting for the user's answer")
    await task.answered.wait()
    task.move("working", "the answer arrived")
    response = task.answers.get("answer") or {}
    if response.get("action") != "accept":
        return _text("declined")
    return _text(f"you said: {(response.get('content') or {}).get('answer')}")


async def _forever(task: ServerTask, arguments: Mapping[str, Any]) -> dict[str, Any]:
    task.move("working", "working, and never done")
    await anyio.sleep_forever()
    raise AssertionError("unreachable")  # pragma: no cover


def _shown(value: int) -> dict[str, Any]:
    shown = {"value": value, "double": 2 * value}
    return {"content": [{"type": "text", "text": json.dumps(shown)}], "structuredContent": shown, "isError": False}


async def _show_later(task: ServerTask, arguments: Mapping[str, Any]) -> dict[str, Any]:
    task.move("working", "preparing the view")
    await _wait_for_gate(arguments.get("gate"))
    return _shown(int(arguments.get("value", 0)))


BODIES: dict[str, Body] = {
    "slow_echo": _slow_echo,
    "task_fail": _task_fail,
    "ask": _ask,
    "forever": _forever,
    "show_later": _show_later,
}


def build_task_server(
    name: str = "tasks", *, record: pathlib.Path | None = None, poll_ms: int = 50
) -> tuple[MCPServer, TasksExtension]:
    """A fresh task server named ``name`` (recording task bodies in ``record``; ``poll_ms`` the poll interval
    it asks for) and its extension (whose ``tasks`` and ``record`` a test in the same process may read)."""
    extension = TasksExtension(BODIES, TaskRecord(record), poll_ms)

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as group:
            extension.task_group = group
            try:
                yield {}
            finally:
                extension.task_group = None
                group.cancel_scope.cancel()

    with keeping_root_logging():
        server = MCPServer(name, extensions=[extension], lifespan=lifespan)
    _add_tools(server, extension)
    return server, extension


def _add_tools(server: MCPServer, extension: TasksExtension) -> None:
    """The tools' inline forms (what a client that takes no tasks gets) and ``task_stats``."""

    @server.tool(description="Echo `text` after `steps` steps (waiting for the file `gate`, if given).")
    async def slow_echo(text: str, steps: int = 3, gate: str | None = None, seconds: float = 0) -> CallToolResult:
        await _wait_for_gate(gate)
        await anyio.sleep(seconds)
        return CallToolResult(content=[TextContent(type="text", text=text)])

    @server.tool(description="Fail with the JSON-RPC error -32603 `message`.")
    async def task_fail(message: str) -> CallToolResult:
        raise MCPError(INTERNAL_ERROR, message)

    @server.tool(description="Ask the user `question` during a task (needs the tasks extension).")
    async def ask(question: str, gate: str | None = None) -> CallToolResult:
        raise _missing_capability("ask")

    @server.tool(description="A task that never ends on its own (needs the tasks extension).")
    async def forever() -> CallToolResult:
        raise _missing_capability("forever")

    @server.tool(description="Show `value` in its app, once `gate` exists.", meta={"ui": {"resourceUri": SHOW_APP_URI}})
    async def show_later(value: int, gate: str | None = None) -> CallToolResult:
        await _wait_for_gate(gate)
        return CallToolResult.model_validate(_shown(value))

    @server.resource(SHOW_APP_URI, mime_type="text/html;profile=mcp-app")
    async def show_app() -> str:
        return "<!doctype html><title>show_later</title><p>the value</p>"

    @server.tool(description="How many times each tool's task body ran, and how many were cancelled.")
    async def task_stats() -> dict[str, Any]:
        record = extension.record
        return {"ran": dict(record.ran), "cancelled": dict(record.cancelled), "polls": extension.polls}


def main(argv: list[str] | None = None) -> None:
    """Command line: serve the task server over stdio, or over streamable HTTP with ``--http``."""
    parser = serving_options(argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None))
    parser.add_argument("--name", default="tasks")
    parser.add_argument("--record", default=os.environ.get(RECORD_ENV), help="append task events to this file")
    parser.add_argument("--poll-ms", type=int, default=50, help="the pollIntervalMs the server asks for")
    args = parser.parse_args(argv)
    record = pathlib.Path(args.record) if args.record else None
    server, _extension = build_task_server(args.name, record=record, poll_ms=args.poll_ms)
    run_server(server, args, f"task server {args.name} started")


if __name__ == "__main__":
    main()
