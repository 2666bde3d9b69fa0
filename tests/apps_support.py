"""An MCP server in process with an app (MCP Apps), for the fast tests: a tool with an interface (``show``), one only
its app may call (``app_only``), one only the model may call (``model_only``), a plain one (``plain``), the app's
``ui://`` resource and a resource that is not an app's, ``capabilities`` (what the client declared) and ``pid`` (the
process serving the call), ``slow`` (its app's, sleeps). ``python -m tests.apps_support`` serves it over stdio."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import trio
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer

APP_URI = "ui://show/app.html"
APP_HTML = "<!doctype html><title>show</title><p>the app</p>"
MIME = "text/html;profile=mcp-app"


def build_app_server(*, big: int = 0, extensions: Sequence[Extension] = ()) -> MCPServer:
    """A fresh app server; ``big``: characters of a ``ui://big/app.html`` resource (a size gate's test);
    ``extensions``: the server's own (a test's)."""
    server = MCPServer("apps", extensions=list(extensions))

    @server.tool(description="Shows a value in its app.", meta={"ui": {"resourceUri": APP_URI}})
    async def show(value: int) -> dict[str, Any]:
        return {"value": value, "double": value * 2}

    @server.tool(description="Only the app calls it.", meta={"ui": {"resourceUri": APP_URI, "visibility": ["app"]}})
    async def app_only(step: int) -> dict[str, Any]:
        return {"step": step + 1}

    @server.tool(description="Only the model calls it.", meta={"ui": {"visibility": ["model"]}})
    async def model_only() -> str:
        return "model"

    @server.tool(description="A plain tool, with a legacy interface key.", meta={"ui/resourceUri": APP_URI})
    async def legacy() -> str:
        return "legacy"

    @server.tool(description="A plain tool.")
    async def plain() -> str:
        return "plain"

    @server.tool(description="The extensions the client declared.")
    async def capabilities(ctx: Context) -> dict[str, Any]:
        params = ctx.request_context.session.client_params
        extensions = params.capabilities.extensions if params else None
        return {"extensions": extensions or {}}

    @server.tool(description="Sleeps, for its app.", meta={"ui": {"visibility": ["app"]}})
    async def slow(seconds: float) -> str:
        await trio.sleep(seconds)
        return "slept"

    @server.tool(description="The id of the process serving the call.")
    async def pid() -> int:
        return os.getpid()

    @server.resource(APP_URI, mime_type=MIME)
    async def app() -> str:
        return APP_HTML

    @server.resource("ui://big/app.html", mime_type=MIME)
    async def big_app() -> str:
        return "x" * big

    @server.resource("file:///etc/hostname", mime_type="text/plain")
    async def not_an_app() -> str:
        return "a file"

    return server


if __name__ == "__main__":
    build_app_server().run("stdio")
