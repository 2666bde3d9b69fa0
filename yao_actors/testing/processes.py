"""Launching the test MCP server as a real process: over stdio (a ``ServerSpec``) or streamable HTTP on loopback.

``stdio_test_server(id)`` is a spec that runs ``python -m yao_actors.testing.servers``
as a stdio subprocess (a server actor starts and stops it);
``open_http_test_server(name)`` starts the same server over streamable HTTP on a
free loopback port and stops it on exit; ``read_line`` reads one line from a
process's pipe without consuming anything past it. ``open_http_task_server(record)``
does the same for the tasks-extension server (``yao_actors.testing.task_servers``), which outlives any client. Used
by this project's tests and benchmarks, and by ``yao-actors bench``'s own tests; they need no checkout.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from yao_actors.specs import ServerSpec, StdioTransport

#: The command line of the test server over stdio (``--name ID`` names it).
TEST_SERVER_COMMAND = (sys.executable, "-m", "yao_actors.testing.servers")


async def read_line(stream: trio.abc.ReceiveStream, *, end: bytes = b"\n") -> str:
    """Read up to and including ``end``, one byte at a time so nothing past it is consumed.

    Raises ``EOFError`` if the stream ends first (the process exited, the peer closed).
    """
    data = b""
    while not data.endswith(end):
        chunk = await stream.receive_some(1)
        if not chunk:
            raise EOFError(f"the stream ended before {end!r} (read {data!r})")
        data += chunk
    return data[: -len(end)].decode()


def stdio_test_server(server_id: str, **spec: Any) -> ServerSpec:
    """A spec running ``yao_actors.testing.servers`` as a stdio subprocess; ``spec`` options for its ServerSpec."""
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
            if not words or words[0] != "LISTENING":
                raise RuntimeError(f"the HTTP test server said {line!r} instead of LISTENING <url>")
            self._url = words[1]
        return self._url


@asynccontextmanager
async def open_http_test_server(name: str = "test", *, sse: bool = False) -> AsyncIterator[HttpTestServer]:
    """Start the test server over streamable HTTP (or HTTP+SSE with ``sse=True``) on 127.0.0.1, port 0;
    stop it on exit.

    It boots while the caller goes on; ``await server.url()`` waits until it listens.
    """
    process = await trio.lowlevel.open_process(
        [*TEST_SERVER_COMMAND, "--sse" if sse else "--http", "--port", "0", "--name", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield HttpTestServer(process)
    finally:
        await stop_process(process)


#: The command line of the tasks-extension test server over stdio.
TASK_SERVER_COMMAND = (sys.executable, "-m", "yao_actors.testing.task_servers")


@asynccontextmanager
async def open_http_task_server(
    record: pathlib.Path | None = None, *, name: str = "tasks", poll_ms: int = 50
) -> AsyncIterator[HttpTestServer]:
    """Start the tasks-extension server over streamable HTTP on 127.0.0.1, port 0, as its own process
    (appending its task events to ``record``, asking for ``poll_ms`` between polls); stop it on exit."""
    command = [*TASK_SERVER_COMMAND, "--http", "--port", "0", "--name", name, "--poll-ms", str(poll_ms)]
    if record is not None:
        command += ["--record", str(record)]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        yield HttpTestServer(process)
    finally:
        await stop_process(process)


async def stop_process(process: trio.Process, grace: float = 5.0) -> None:
    """SIGTERM, up to ``grace`` seconds to exit, then SIGKILL; shielded, so a cancelled caller still stops it."""
    with trio.CancelScope(shield=True):
        process.terminate()
        with trio.move_on_after(grace):
            await process.wait()
        process.kill()
        await process.wait()
