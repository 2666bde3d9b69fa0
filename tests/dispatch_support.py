"""Scripted MCP servers in process, served by real server actors, for fast dispatch and conversation tests.

A :class:`ScriptedServer` is a low-level ``mcp`` server whose tools run Python
scripts; :func:`serving` starts a real server actor for each one (the handle's
deadlines, queue and ``max_concurrency`` are the real ones) and connects it
through the server's own connector, which a test can refuse (``go_down``). The
server side counts every execution and records the calls that were cancelled
mid-flight (what a server sees as ``notifications/cancelled``). Sleeps are Trio
sleeps, so tests run them under ``autojump_clock``.
"""

from __future__ import annotations

import collections
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import mcp
import mcp.types
import trio
from mcp.server.lowlevel import Server

from yao_actors.config import InMemoryTransport, ServerRef, ServerSpec
from yao_actors.errors import ErrorKind
from yao_actors.tools.catalog import Catalog, build_catalog
from yao_actors.tools.results import ToolOutcome
from yao_actors.tools.server_actor import ServerHandle, ServerState, serve_mcp_server
from yao_actors.tools.tool_server import ProgressFn
from yao_actors.transports import Link, open_client

ToolFn = Callable[[dict[str, Any], ProgressFn | None, int], Awaitable[ToolOutcome]]
"""A scripted tool: ``(arguments, progress, execution number) -> outcome``."""

OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


class Crash(Exception):
    """Raised by a script: the server dies under the call (its connection is lost with ``exit_code``)."""

    def __init__(self, reason: str, exit_code: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.exit_code = exit_code


async def echo(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    return ToolOutcome(result=arguments)


async def sleep(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    await trio.sleep(float(arguments.get("seconds", 0)))
    return ToolOutcome(result={"slept": arguments.get("seconds", 0)})


async def fail(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    text = str(arguments.get("message", "bad input"))
    return ToolOutcome(error=text, kind=ErrorKind.TOOL_ERROR)


async def flaky(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    """Fails retryably on its first execution, succeeds afterwards."""
    if n == 1:
        return ToolOutcome(error="busy, try again", kind=ErrorKind.TOOL_ERROR)
    return ToolOutcome(result={"attempt": n})


async def report_progress(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    steps = int(arguments.get("steps", 3))
    for step in range(1, steps + 1):
        if progress is not None:
            await progress(float(step), float(steps), f"step {step}")
        await trio.sleep(0.01)
    return ToolOutcome(result={"steps": steps})


SCRIPTS: dict[str, ToolFn] = {
    "echo": echo,
    "sleep": sleep,
    "fail": fail,
    "flaky": flaky,
    "progress": report_progress,
}


def tool(name: str, schema: dict[str, Any] | None = None, description: str = "") -> mcp.types.Tool:
    return mcp.types.Tool(name=name, description=description or None, input_schema=schema or OBJECT_SCHEMA)


def _call_result(outcome: ToolOutcome) -> mcp.types.CallToolResult:
    """What a scripted outcome looks like on the wire: a text block, flagged ``isError`` for a tool error."""
    if outcome.kind is ErrorKind.TOOL_ERROR:
        return mcp.types.CallToolResult(
            content=[mcp.types.TextContent(type="text", text=outcome.error or "")], is_error=True
        )
    value = outcome.result
    text = value if isinstance(value, str) else json.dumps(value)
    return mcp.types.CallToolResult(content=[mcp.types.TextContent(type="text", text=text)])


@attrs.define(eq=False, slots=False)
class ScriptedServer:
    """A scripted MCP server in process; a tool without a script echoes. Tests read what it saw."""

    spec_options: dict[str, Any]
    server_id: str
    tools: list[mcp.types.Tool] = attrs.field(factory=list)
    scripts: dict[str, ToolFn] = attrs.field(factory=lambda: dict(SCRIPTS))
    down: bool = False
    executions: collections.Counter[str] = attrs.field(factory=collections.Counter)
    cancelled: list[str] = attrs.field(factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    log: list[tuple[str, dict[str, Any] | None]] = attrs.field(factory=list)
    link: Link | None = None
    handle: ServerHandle | None = None

    @property
    def id(self) -> str:
        return self.server_id

    @functools.cached_property
    def spec(self) -> ServerSpec:
        return ServerSpec(self.server_id, InMemoryTransport(self._mcp_server()), **self.spec_options)

    @asynccontextmanager
    async def connect(self, spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
        """The connector its actor uses: refused while the server is down."""
        if self.down:
            raise OSError(f"server {self.id!r} is down")
        self.link = link
        async with open_client(spec, link=link, **kwargs) as client:
            yield client

    async def go_down(self) -> None:
        """Lose the connection and refuse new ones; return once the actor knows."""
        assert self.link is not None
        assert self.handle is not None
        self.down = True
        self.link.mark_lost(f"server {self.id!r} went down")
        await self.handle.wait_for_state(ServerState.RESTARTING, ServerState.DOWN)

    def _mcp_server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: mcp.types.PaginatedRequestParams | None) -> mcp.types.ListToolsResult:
            return mcp.types.ListToolsResult(tools=list(self.tools))

        async def call_tool(ctx: Any, params: mcp.types.CallToolRequestParams) -> mcp.types.CallToolResult:
            return await self._run(params.name, params.arguments, ctx.session.report_progress)

        return Server(self.server_id, on_list_tools=list_tools, on_call_tool=call_tool)

    async def _run(self, name: str, arguments: dict[str, Any] | None, progress: ProgressFn) -> mcp.types.CallToolResult:
        self.executions[name] += 1
        self.log.append((name, arguments))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            outcome = await self.scripts.get(name, echo)(dict(arguments or {}), progress, self.executions[name])
        except trio.Cancelled:
            self.cancelled.append(name)
            raise
        except Crash as crash:
            assert self.link is not None
            self.link.mark_lost(crash.reason, exit_code=crash.exit_code)
            await trio.sleep_forever()  # the connection goes down under the call
        finally:
            self.in_flight -= 1
        return _call_result(outcome)


def scripted_server(server_id: str, tools: list[mcp.types.Tool] | None = None, **spec: Any) -> ScriptedServer:
    """A scripted server with ``tools`` (default: one per script, open schema); ``spec`` options for its ServerSpec."""
    listed = tools if tools is not None else [tool(name) for name in SCRIPTS]
    return ScriptedServer(spec, server_id, listed)


@asynccontextmanager
async def serving(*scripted: ScriptedServer) -> AsyncIterator[dict[str, ServerHandle]]:
    """A real server actor for each scripted server, connected through its connector; their handles by id."""
    async with trio.open_nursery() as nursery:
        handles = {}
        for server in scripted:
            start = functools.partial(serve_mcp_server, server.spec, connect=server.connect)
            server.handle = handles[server.id] = await nursery.start(start)
        yield handles
        nursery.cancel_scope.cancel()


async def catalog_of(servers: dict[str, ServerHandle]) -> Catalog:
    """The catalog over every tool of ``servers``."""
    return await build_catalog([ServerRef(server_id) for server_id in servers], servers, max_tools=100)
