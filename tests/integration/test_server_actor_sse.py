"""Server actors over HTTP+SSE (``"type": "sse"`` in Claude Desktop / Cursor / Cline files), the server in its own
process on 127.0.0.1 (port 0), through the MCP SDK's SSE client."""

from __future__ import annotations

import pytest
import trio

from tests.integration import actor_checks
from tests.integration.actor_checks import running
from yao_actors.config import RestartPolicy, ServerSpec, SseTransport, parse_config
from yao_actors.errors import ErrorKind
from yao_actors.testing import open_http_test_server
from yao_actors.tools.server_actor import ServerState

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")


async def test_an_sse_server_from_a_config_file_serves_calls() -> None:
    with trio.fail_after(60):
        async with open_http_test_server("legacy", sse=True) as server:
            url = await server.url()
            assert url.endswith("/sse")
            config = parse_config({"mcpServers": {"legacy": {"type": "sse", "url": url, "timeout": 8.0}}})
            spec = config.servers["legacy"]
            assert spec.transport == SseTransport(url)
            async with running(spec) as handle:
                assert handle.state is ServerState.READY
                await actor_checks.check_list_and_call(handle)
                await actor_checks.check_concurrent_calls(handle)
                await actor_checks.check_progress(handle)
                await actor_checks.check_deadline(handle)


async def test_an_sse_server_that_goes_away_fails_calls_fast() -> None:
    with trio.fail_after(60):
        async with open_http_test_server("legacy", sse=True) as server:
            url = await server.url()
            restart = RestartPolicy(max_restarts=50, backoff_initial=0.05, backoff_max=0.2)
            async with running(ServerSpec("legacy", SseTransport(url), restart=restart)) as handle:
                assert (await handle.call_tool("add", {"a": 1, "b": 2})).result == {"sum": 3}
                server.process.kill()
                await handle.wait_for_state(ServerState.RESTARTING, ServerState.STARTING)
                outcome = await handle.call_tool("add", {"a": 1, "b": 2})
                assert outcome.kind is ErrorKind.SERVER_UNAVAILABLE
