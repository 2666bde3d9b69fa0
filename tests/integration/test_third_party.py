"""A third-party MCP server nobody here wrote, end to end: ``mcp-server-time`` from PyPI over stdio."""

from __future__ import annotations

import sys

import trio

from tests.integration.actor_checks import running
from yao_actors.config import ServerSpec, StdioTransport
from yao_actors.tools.server_actor import ServerState


async def test_mcp_server_time_lists_and_answers() -> None:
    transport = StdioTransport(command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))
    with trio.fail_after(60):
        async with running(ServerSpec(id="time", transport=transport, timeout=20)) as handle:
            assert handle.state is ServerState.READY
            tools = {tool.name: tool for tool in await handle.list_tools()}
            assert {"get_current_time", "convert_time"} <= set(tools)
            assert "timezone" in tools["get_current_time"].input_schema["properties"]

            now = await handle.call_tool("get_current_time", {"timezone": "Asia/Shanghai"})
            assert now.ok, now
            assert now.result["timezone"] == "Asia/Shanghai"
            assert now.result["datetime"].endswith("+08:00")

            converted = await handle.call_tool(
                "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
            assert converted.ok, converted
            assert converted.result["target"]["datetime"].split("T")[1].startswith("21:00")

            bad = await handle.call_tool("get_current_time", {"timezone": "Mars/Olympus_Mons"})
            assert not bad.ok
            assert bad.error
