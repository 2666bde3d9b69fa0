"""The official MCP App servers from npm (``tests/node``), over stdio and streamable HTTP, for the MCP Apps tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.support import require_tool
from yao_actors.config import HttpTransport, ServerSpec, StdioTransport
from yao_actors.testing.processes import read_line, stop_process

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
PACKAGES = NODE_DIR / "node_modules" / "@modelcontextprotocol"
#: The npm package of each app server, by the name the tests use.
APP_SERVERS = {"basic": "server-basic-vanillajs", "budget": "server-budget-allocator"}


def node() -> str:
    path = shutil.which("node")
    require_tool(path, "node")
    assert path is not None
    return path


def app_server_main(name: str) -> str:
    """The entry point of an app server's package (its ``dist/index.js``)."""
    main = PACKAGES / APP_SERVERS[name] / "dist" / "index.js"
    require_tool(str(main) if main.is_file() else None, f"@modelcontextprotocol/{APP_SERVERS[name]}")
    return str(main)


def stdio_app_server(server_id: str, name: str = "basic", **options: object) -> ServerSpec:
    """An app server as a stdio subprocess (``--stdio``)."""
    transport = StdioTransport(node(), (app_server_main(name), "--stdio"))
    return ServerSpec(server_id, transport, timeout=30, connect_timeout=60, **options)  # type: ignore[arg-type]


def free_port() -> int:
    """A loopback port nobody listens on now (the app servers take their port from ``PORT`` and print none)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def http_app_server(name: str = "basic") -> AsyncIterator[str]:
    """An app server over streamable HTTP (its own ``PORT``); yields its ``/mcp`` URL once it listens."""
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    process = await trio.lowlevel.open_process(
        [node(), app_server_main(name)], stdout=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        assert process.stdout is not None
        with trio.fail_after(60):
            line = await read_line(process.stdout)
        assert "listening" in line, line
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)


def http_app_spec(server_id: str, url: str, **options: object) -> ServerSpec:
    return ServerSpec(server_id, HttpTransport(url), timeout=30, connect_timeout=60, **options)  # type: ignore[arg-type]
