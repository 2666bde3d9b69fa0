"""The asking server (:mod:`yao_actors.testing.asking`) for the tests: as a stdio command, or over streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tests.integration.processes import listening_process
from yao_actors.config import HttpTransport, StdioTransport


@asynccontextmanager
async def http_asking_server() -> AsyncIterator[HttpTransport]:
    command = [sys.executable, "-m", "yao_actors.testing.asking", "--http"]
    async with listening_process(command) as (url, _):
        yield HttpTransport(url)


@asynccontextmanager
async def asking_server(transport: str) -> AsyncIterator[StdioTransport | HttpTransport]:
    """The asking server as a stdio command, or running over streamable HTTP in its own process."""
    if transport == "stdio":
        yield StdioTransport(sys.executable, ("-m", "yao_actors.testing.asking"))
        return
    async with http_asking_server() as where:
        yield where
