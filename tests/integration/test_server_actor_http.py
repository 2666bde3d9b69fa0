"""Server actors over streamable HTTP on 127.0.0.1, the server in its own process (port 0)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from tests.integration import actor_checks
from tests.integration.actor_checks import PROTOCOLS, fail_in_flight, running
from tests.integration.processes import listening_process
from yao_actors.config import HttpTransport, RestartPolicy, ServerSpec
from yao_actors.errors import ErrorKind
from yao_actors.tools.server_actor import ServerState

# The SDK leaves httpx2's SSE text generators to the garbage collector; Trio finalizes them
# and warns. Harmless, and not ours to fix.
pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")


@asynccontextmanager
async def http_test_server(port: int = 0) -> AsyncIterator[tuple[str, trio.Process]]:
    """Run the test server over streamable HTTP in its own process; yield its URL once it listens."""
    command = [sys.executable, "-m", "yao_actors.testing.servers", "--http", "--port", str(port)]
    async with listening_process(command) as (url, process):
        yield url, process


def http_spec(url: str, **changes: Any) -> ServerSpec:
    restart = RestartPolicy(max_restarts=50, backoff_initial=0.05, backoff_max=0.2)
    return ServerSpec(id="http", transport=HttpTransport(url=url), restart=restart, **changes)


@pytest.mark.parametrize(("protocol", "version"), PROTOCOLS)
async def test_behaviour_over_http(protocol: str, version: str) -> None:
    with trio.fail_after(60):
        spec = http_spec(url="", timeout=3.0, protocol=protocol)
        async with (
            http_test_server() as (url, _process),
            running(attrs.evolve(spec, transport=HttpTransport(url))) as h,
        ):
            assert h.statistics().protocol == version
            await actor_checks.check_all(h)


@pytest.mark.parametrize(("protocol", "version"), PROTOCOLS)
async def test_server_goes_away_and_comes_back(protocol: str, version: str) -> None:
    with trio.fail_after(60):
        async with http_test_server() as (url, process):
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            async with running(http_spec(url, timeout=100, protocol=protocol)) as handle:
                await fail_in_flight(handle, 3, process.kill, within=10)  # long before the calls' own 50 s

                while handle.state is ServerState.READY:
                    down = await handle.call_tool("echo", {"text": "x"})
                    assert down.kind is ErrorKind.SERVER_UNAVAILABLE
                    await trio.sleep(0.05)
                # whichever noticed first: the refused GET stream, or the calls' streams closing
                last_error = handle.statistics().last_error or ""
                assert any(why in last_error for why in ("the connection to the server closed", "cannot connect to"))

                async with http_test_server(port):
                    await handle.wait_for_state(ServerState.READY)
                    assert (await handle.call_tool("add", {"a": 2, "b": 2})).result == {"sum": 4}
                    assert handle.statistics().restarts >= 1
                    assert handle.statistics().protocol == version
