"""The asking server (:mod:`yao_actors.testing.asking`) for the tests: as a stdio command, or over streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from yao_actors.config import HttpTransport, StdioTransport
from yao_actors.testing import read_line
from yao_actors.transports import stop_process


@asynccontextmanager
async def http_asking_server() -> AsyncIterator[HttpTransport]:
    command = [sys.executable, "-m", "yao_actors.testing.asking", "--http"]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert process.stdout is not None
        word, url = (await read_line(process.stdout)).split()
        assert word == "LISTENING"
        yield HttpTransport(url)
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)


@asynccontextmanager
async def asking_server(transport: str) -> AsyncIterator[StdioTransport | HttpTransport]:
    """The asking server as a stdio command, or running over streamable HTTP in its own process."""
    if transport == "stdio":
        yield StdioTransport(sys.executable, ("-m", "yao_actors.testing.asking"))
        return
    async with http_asking_server() as where:
        yield where
