"""The official ``@modelcontextprotocol/server-everything`` (npm) as a real process: over stdio (a spec the
server actor starts), or over streamable HTTP as its own process on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from yao_actors.specs import HttpTransport, ServerSpec, StdioTransport
from yao_actors.testing import read_line
from yao_actors.testing.processes import stop_process

EVERYTHING = (
    Path(__file__).resolve().parents[1] / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything"
)
ENTRY = str(EVERYTHING / "dist" / "index.js")


def everything_stdio(server_id: str = "everything", **spec: Any) -> ServerSpec:
    return ServerSpec(server_id, StdioTransport("node", (ENTRY, "stdio")), **spec)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def open_everything_http(server_id: str = "everything", **spec: Any) -> AsyncIterator[ServerSpec]:
    """Start server-everything over streamable HTTP; a spec reaching it once it listens; stop it (by its pid)."""
    port = _free_port()
    process = await trio.lowlevel.open_process(
        ["node", ENTRY, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        with trio.fail_after(30):
            while "listening on port" not in await read_line(process.stderr):
                pass
        yield ServerSpec(server_id, HttpTransport(f"http://127.0.0.1:{port}/mcp"), **spec)
    finally:
        await stop_process(process)
        assert process.stderr is not None
        with trio.CancelScope(shield=True):
            await process.stderr.aclose()
