"""In-memory server handles for fast catalog and dispatch tests.

:class:`FakeServer` has the surface of a real server handle (``id``, ``spec``,
``tools_version``, ``list_tools``, ``call_tool``) with scripted tools, counts
every execution on the "server side", applies ``spec.timeout`` the way the real
actor does, and records calls that were cancelled mid-flight (what a real server
sees as ``notifications/cancelled``). Sleeps are Trio sleeps, so tests run them
under ``autojump_clock``.
"""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import mcp.types
import trio

from tests.process_support import read_line
from yao_actors.config import InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.dispatch import ProgressFn
from yao_actors.errors import ErrorKind
from yao_actors.results import ToolOutcome
from yao_actors.server_actor import ServerState

ToolFn = Callable[[dict[str, Any], ProgressFn | None, int], Awaitable[ToolOutcome]]
"""A scripted tool: ``(arguments, progress, execution number) -> outcome``."""

OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}


async def echo(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    return ToolOutcome(result=arguments)


async def sleep(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    await trio.sleep(float(arguments.get("seconds", 0)))
    return ToolOutcome(result={"slept": arguments.get("seconds", 0)})


async def fail(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    text = str(arguments.get("message", "bad input"))
    return ToolOutcome(result=text, error=text, kind=ErrorKind.TOOL_ERROR)


async def flaky(arguments: dict[str, Any], progress: ProgressFn | None, n: int) -> ToolOutcome:
    """Fails retryably on its first execution, succeeds afterwards."""
    if n == 1:
        return ToolOutcome(result="busy, try again", error="busy, try again", kind=ErrorKind.TOOL_ERROR)
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


@attrs.define(eq=False)
class FakeServer:
    """A scripted in-memory stand-in for a server handle; a tool without a script echoes."""

    spec: ServerSpec
    tools: list[mcp.types.Tool] = attrs.field(factory=list)
    scripts: dict[str, ToolFn] = attrs.field(factory=lambda: dict(SCRIPTS))
    tools_version: int = 0
    down: bool = False
    executions: collections.Counter[str] = attrs.field(factory=collections.Counter)
    cancelled: list[str] = attrs.field(factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    list_calls: int = 0
    log: list[tuple[str, dict[str, Any] | None]] = attrs.field(factory=list)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def state(self) -> ServerState:
        return ServerState.RESTARTING if self.down else ServerState.READY

    def set_tools(self, tools: list[mcp.types.Tool]) -> None:
        """Change the catalog, as a ``tools/list_changed`` would."""
        self.tools = tools
        self.tools_version += 1

    async def list_tools(self) -> tuple[mcp.types.Tool, ...]:
        self.list_calls += 1
        return tuple(self.tools)

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, *, progress: ProgressFn | None = None
    ) -> ToolOutcome:
        start = trio.current_time()
        if self.down:
            return ToolOutcome(error=f"server {self.id!r} is down", kind=ErrorKind.SERVER_UNAVAILABLE)
        self.executions[name] += 1
        self.log.append((name, arguments))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            with trio.move_on_after(self.spec.timeout) as scope:
                outcome = await self.scripts.get(name, echo)(dict(arguments or {}), progress, self.executions[name])
                return attrs.evolve(outcome, duration=trio.current_time() - start)
            assert scope.cancelled_caught
            self.cancelled.append(name)
            return ToolOutcome(
                error=f"timed out after {self.spec.timeout} s",
                kind=ErrorKind.TIMEOUT,
                duration=trio.current_time() - start,
            )
        except trio.Cancelled:
            self.cancelled.append(name)
            raise
        finally:
            self.in_flight -= 1


def fake_server(server_id: str, tools: list[mcp.types.Tool] | None = None, **spec: Any) -> FakeServer:
    """A fake server with ``tools`` (default: one per script, open schema)."""
    listed = tools if tools is not None else [tool(name) for name in SCRIPTS]
    return FakeServer(ServerSpec(server_id, InMemoryTransport(None), **spec), listed)


def servers_of(*fakes: FakeServer) -> dict[str, FakeServer]:
    return {fake.id: fake for fake in fakes}


TEST_SERVER_COMMAND = (sys.executable, "-m", "yao_actors.testing.servers")


def stdio_test_server(server_id: str, **spec: Any) -> ServerSpec:
    """A spec running ``yao_actors.testing.servers`` as a stdio subprocess."""
    return ServerSpec(
        server_id, StdioTransport(TEST_SERVER_COMMAND[0], (*TEST_SERVER_COMMAND[1:], "--name", server_id)), **spec
    )


@attrs.define(eq=False)
class HttpTestServer:
    """The test server running over streamable HTTP in its own process."""

    process: trio.Process
    _url: str | None = None

    async def url(self) -> str:
        """Wait until the server listens; its ``http://127.0.0.1:PORT/mcp`` URL."""
        if self._url is None:
            assert self.process.stdout is not None
            try:
                line = await read_line(self.process.stdout)
            except EOFError:
                raise RuntimeError(
                    f"the HTTP test server exited before listening (code {self.process.poll()})"
                ) from None
            words = line.split()
            assert words[0] == "LISTENING", line
            self._url = words[1]
        return self._url


@asynccontextmanager
async def open_http_test_server(name: str = "test") -> AsyncIterator[HttpTestServer]:
    """Start the test server over streamable HTTP on 127.0.0.1, port 0; stop it on exit.

    It boots while the caller goes on; ``await server.url()`` waits until it listens.
    """
    process = await trio.lowlevel.open_process(
        [*TEST_SERVER_COMMAND, "--http", "--port", "0", "--name", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield HttpTestServer(process)
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(5):
                await process.wait()
            process.kill()
            await process.wait()
