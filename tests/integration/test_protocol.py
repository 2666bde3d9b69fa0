"""The MCP protocol per server: ``auto`` falls back to the handshake in bounded time, a discover result is kept
across reconnects, and the version shows in ``statistics()`` and the ``server_status`` event."""

from __future__ import annotations

import os
import signal
import sys

import mcp
import pytest
import trio

from tests.integration.actor_checks import running
from tests.support import noting_connector
from yao_actors import AssistantSpec, Completion, Config, FunctionModel, ServerRef, ToolCall, open_runtime
from yao_actors.config import RestartPolicy, ServerSpec, StdioTransport
from yao_actors.tools.server_actor import ServerState
from yao_actors.transports import DISCOVER_TIMEOUT

FAST_RESTART = RestartPolicy(max_restarts=3, backoff_initial=0.05, backoff_max=0.5)

#: A handshake-only server that never answers ``server/discover`` (as an old server stuck on an unknown method
#: might): ``auto`` must give up on the probe after DISCOVER_TIMEOUT and shake hands.
SILENT_ON_DISCOVER = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "old", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong"}]}
    else:
        continue  # server/discover and notifications: no answer
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}) + "\n")
    sys.stdout.flush()
"""


def test_server_spec_refuses_an_unknown_protocol() -> None:
    with pytest.raises(Exception, match="protocol: must be one of 'auto', 'legacy', '2026-07-28', got '2025-11-25'"):
        ServerSpec("x", StdioTransport("x"), protocol="2025-11-25")


async def test_auto_shakes_hands_with_a_server_that_never_answers_discover() -> None:
    # The SDK's own probe would wait 10 s: within a connect deadline of 8 s only our bounded probe gets through.
    assert DISCOVER_TIMEOUT < 8
    spec = ServerSpec("old", StdioTransport(sys.executable, ("-c", SILENT_ON_DISCOVER)), connect_timeout=8)
    with trio.fail_after(30):
        async with running(spec) as handle:
            assert handle.state is ServerState.READY, handle.statistics().last_error
            assert handle.statistics().protocol == "2025-06-18"
            assert (await handle.call_tool("ping", {})).result == "pong"


async def test_the_server_status_event_names_the_protocol() -> None:
    transport = StdioTransport(sys.executable, ("-m", "yao_actors.testing.servers", "--name", "s"))
    spec = ServerSpec("s", transport, restart=RestartPolicy(max_restarts=1, backoff_initial=30, backoff_max=30))
    crash = ToolCall("c1", "s__crash", {"code": 3})
    model = FunctionModel(
        lambda messages, tools: "done" if messages[-1]["role"] == "tool" else Completion(tool_calls=(crash,))
    )
    assistant = AssistantSpec("a", "scripted", prompt="Be brief", servers=(ServerRef("s"),))
    config = Config(servers={"s": spec}, assistants={"a": assistant})
    with trio.fail_after(30):
        async with open_runtime(config, models={"scripted": model}) as runtime:
            result = await runtime.run("a", "crash")
    statuses = [e["value"] for e in result.events if e["type"] == "CUSTOM" and e["name"] == "server_status"]
    assert statuses == [
        {"server": "s", "state": "unavailable", "detail": statuses[0]["detail"], "protocol": "2026-07-28"}
    ]


async def test_a_discover_result_is_kept_across_reconnects() -> None:
    priors: list[mcp.types.DiscoverResult | None] = []

    recording = noting_connector(lambda spec, options: priors.append(options.get("prior_discover")))

    transport = StdioTransport(sys.executable, ("-m", "yao_actors.testing.servers", "--name", "modern"))
    spec = ServerSpec("modern", transport, restart=FAST_RESTART, protocol="auto")
    with trio.fail_after(60):
        async with running(spec, connect=recording) as handle:
            assert handle.statistics().protocol == "2026-07-28"
            pid = handle.statistics().pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            while handle.statistics().restarts == 0 or handle.state is not ServerState.READY:
                await handle.wait_state_change()
            assert (await handle.call_tool("add", {"a": 1, "b": 2})).result == {"sum": 3}
            assert handle.statistics().protocol == "2026-07-28"
    assert priors[0] is None  # the first connection probed
    assert priors[1] is not None  # the reconnect did not
    assert "2026-07-28" in priors[1].supported_versions
