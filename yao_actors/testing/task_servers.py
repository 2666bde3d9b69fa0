"""An MCP server that answers long tool calls with tasks, as the 2026-07-28 tasks extension says.

The extension's side of it (answering with a task, ``tasks/get``, ``tasks/update``, ``tasks/cancel``, the
``Mcp-Name`` check over HTTP) is :mod:`yao_actors.testing.task_extension`. A client that did not declare the
extension gets plain results (``slow_echo``, ``task_fail``), or for tools that cannot answer without a task
(``ask``, ``forever``) the error ``-32021`` (missing required client capability).

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

Every body that starts, ends, or is cancelled appends a JSON line to the record file (``--record PATH`` or the
environment variable ``YAO_TASK_SERVER_RECORD``; :mod:`yao_actors.testing.task_record`): it outlives any client, so
a test reads there how often a task ran.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from mcp_types.jsonrpc import INTERNAL_ERROR

from yao_actors.config.module_servers import keeping_root_logging
from yao_actors.testing.servers import run_server, serving_options
from yao_actors.testing.task_extension import Body, ServerTask, TasksExtension, missing_capability
from yao_actors.testing.task_record import RECORD_ENV, TaskRecord

#: Tools that answer only with a task.
TASK_ONLY_TOOLS = frozenset({"ask", "forever"})
#: The interface (MCP Apps) of ``show_later``.
SHOW_APP_URI = "ui://tasks/show.html"


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


#: The task tools (a call of one becomes a task when the client allows) and their bodies.
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
    extension = TasksExtension(BODIES, TaskRecord(record), poll_ms, task_only=TASK_ONLY_TOOLS)
    with keeping_root_logging():
        server = MCPServer(name, extensions=[extension], lifespan=extension.serving)
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
        raise missing_capability("ask")

    @server.tool(description="A task that never ends on its own (needs the tasks extension).")
    async def forever() -> CallToolResult:
        raise missing_capability("forever")

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
