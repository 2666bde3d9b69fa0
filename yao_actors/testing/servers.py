"""An MCP server with the tools everyone's tests need, in process or as its own process.

``build_test_server()`` returns a fresh ``MCPServer`` (give it to
``InMemoryTransport``); ``python -m yao_actors.testing.servers`` serves the same
tools over stdio, or over streamable HTTP with ``--http`` (printing
``LISTENING http://HOST:PORT/mcp`` once the socket is bound, so callers can ask
for port 0).

Tools: ``echo``, ``add``, ``sleep``, ``fail`` (an ``isError`` result with exactly
the given text), ``progress`` (reports progress notifications), ``crash`` (exits
the process), ``stats`` (executions per tool, and how many executions were
cancelled by the client), ``whoami`` (the client's name and version),
``register`` (adds a tool and announces ``tools/list_changed``, or on 2026-07-28 to ``subscriptions/listen``), ``trace_context`` (the W3C trace context
the request's ``_meta`` carried), and with ``--tools N`` / ``extra_tools=N`` trivial tools
``t0..t{N-1}``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from mcp_types.version import is_version_at_least

from yao_actors.config.module_servers import keeping_root_logging

P = ParamSpec("P")


def tool_error(message: str) -> CallToolResult:
    """An ``isError`` tool result whose only text is ``message``."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


class _Stats:
    """Executions per tool, and executions ended by the client's cancellation."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.cancelled = 0

    def counted(self, fn: Callable[P, Awaitable[Any]]) -> Callable[P, Awaitable[Any]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            self.calls[fn.__name__] += 1
            try:
                return await fn(*args, **kwargs)
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise

        return wrapper


def build_test_server(name: str = "test", *, extra_tools: int = 0) -> MCPServer:
    """A fresh test server named ``name`` with its own statistics (building it leaves logging as it was)."""
    with keeping_root_logging():
        server = MCPServer(name)
    stats = _Stats()

    @server.tool(description="Return the text it was given: {'text': text}.")
    @stats.counted
    async def echo(text: str) -> dict[str, Any]:
        return {"text": text}

    @server.tool(description="Add two numbers: {'sum': a + b}.")
    @stats.counted
    async def add(a: int | float, b: int | float) -> dict[str, Any]:
        return {"sum": a + b}

    @server.tool(description="Sleep for the given seconds, then return {'slept': seconds}.")
    @stats.counted
    async def sleep(seconds: float) -> dict[str, Any]:
        await anyio.sleep(seconds)
        return {"slept": seconds}

    @server.tool(description="Fail with exactly the given message (an isError result).")
    @stats.counted
    async def fail(message: str) -> CallToolResult:
        return tool_error(message)

    @server.tool(description="Report `steps` progress notifications, then return {'steps': steps}.")
    @stats.counted
    async def progress(steps: int, ctx: Context) -> dict[str, Any]:
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i} of {steps}")
        return {"steps": steps}

    _add_session_tools(server, name, stats)
    for i in range(extra_tools):
        server.add_tool(_trivial(i), name=f"t{i}", description=f"Trivial tool number {i}.")
    return server


def _add_session_tools(server: MCPServer, name: str, stats: _Stats) -> None:
    """The tools about the server and its session: crash, stats, whoami, trace context, registering a tool."""

    @server.tool(description="Write a line to stderr and exit the server process with `code`.")
    async def crash(code: int = 1) -> dict[str, Any]:
        print(f"test server {name}: crashing on purpose with code {code}", file=sys.stderr, flush=True)
        os._exit(code)

    @server.tool(name="stats", description="Executions per tool, and how many executions the client cancelled.")
    async def stats_tool() -> dict[str, Any]:
        return {"calls": dict(stats.calls), "cancelled": stats.cancelled}

    @server.tool(description="Who is calling: the client's name and version from its initialize request.")
    async def whoami(ctx: Context) -> dict[str, Any]:
        params = ctx.request_context.session.client_params
        info = params.client_info if params else None
        return {"name": info.name if info else None, "version": info.version if info else None}

    @server.tool(description="The W3C trace context (traceparent, tracestate) the request's _meta carried.")
    async def trace_context(ctx: Context) -> dict[str, Any]:
        meta = ctx.request_context.meta
        fields = meta if isinstance(meta, dict) else (meta.model_dump() if meta is not None else {})
        return {"traceparent": fields.get("traceparent"), "tracestate": fields.get("tracestate")}

    @server.tool(description="Add a tool named `tool` that echoes, and announce tools/list_changed.")
    async def register(tool: str, ctx: Context) -> dict[str, Any]:
        async def added(text: str) -> dict[str, Any]:
            return {"text": text}

        server.add_tool(added, name=tool, description="An echo added at run time.")
        if is_version_at_least(ctx.protocol_version or "", "2026-07-28"):
            await ctx.notify_tools_changed()  # to the clients' subscriptions/listen streams
        else:
            await ctx.request_context.session.send_tool_list_changed()
        return {"registered": tool}


def _trivial(i: int) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def trivial() -> dict[str, Any]:
        return {"tool": i}

    return trivial


async def serve_http(server: MCPServer, host: str, port: int, sse: bool = False) -> None:
    """Serve streamable HTTP (or HTTP+SSE) on an already bound socket, then announce the bound address."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # listening before the announcement, so a client that reads it is never refused
    bound = sock.getsockname()[1]
    app = server.sse_app(host=host) if sse else server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn_server = uvicorn.Server(config)
    print(f"LISTENING http://{host}:{bound}/{'sse' if sse else 'mcp'}", flush=True)
    await uvicorn_server.serve(sockets=[sock])


def serving_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with the options every test server takes: ``--http`` (streamable HTTP, not stdio), ``--host``,
    ``--port`` (0: a free one)."""
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    return parser


def run_server(server: MCPServer, args: argparse.Namespace, started: str, *, sse: bool = False) -> None:
    """Say ``started`` on stderr, then serve ``server`` as :func:`serving_options` asked (or HTTP+SSE with ``sse``).

    The stderr line comes up front, so supervision reports have a tail to show even after a kill -9.
    """
    print(f"{started} (pid {os.getpid()})", file=sys.stderr, flush=True)
    if args.http or sse:
        anyio.run(serve_http, server, args.host, args.port, sse)
    else:
        server.run()


def main(argv: list[str] | None = None) -> None:
    """Command line: serve a test server over stdio, or over streamable HTTP with ``--http``."""
    parser = serving_options(argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None))
    parser.add_argument("--name", default="test")
    parser.add_argument("--tools", type=int, default=0, help="add trivial tools t0..t{N-1}")
    parser.add_argument("--sse", action="store_true", help="serve HTTP+SSE (the older transport) instead of stdio")
    args = parser.parse_args(argv)
    run_server(
        build_test_server(args.name, extra_tools=args.tools), args, f"test server {args.name} started", sse=args.sse
    )


if __name__ == "__main__":
    main()
