"""MCP Apps with the official app servers from npm, over stdio and streamable HTTP: discovery, the activity a
call of a tool with an interface emits, stored with the run."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from tests.integration.apps_support import http_app_server, http_app_spec, stdio_app_server
from tests.integration.test_dispatch_real import HTTP_SDK_GENERATORS
from tests.integration.test_results_real import open_results_run
from tests.support import check_stream
from yao_actors.config import ServerSpec
from yao_actors.testing import FakeToolCall, Reply
from yao_actors.tools.apps import server_hash

RESOURCE = "ui://get-time/mcp-app.html"


async def get_time_run(server: ServerSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A run whose model calls ``get-time``: the tools it was offered, and the run's events."""
    script = [Reply(tool_calls=(FakeToolCall("r__get-time", "{}", "t1"),)), Reply(text="it is now")]
    with trio.fail_after(120):
        async with open_results_run(script, server) as (fake, manager):
            result = await manager.run("a", "what time is it?")
    check_stream(list(result.events))
    return fake.requests[0].body["tools"], list(result.events)


def check_activity(events: list[dict[str, Any]], spec: ServerSpec) -> dict[str, Any]:
    kinds = [event["type"] for event in events]
    at = kinds.index("TOOL_CALL_RESULT")
    assert kinds[at + 1] == "ACTIVITY_SNAPSHOT"
    activity = events[at + 1]
    assert activity["activityType"] == "mcp-apps"
    assert activity["replace"] is True
    assert activity["messageId"]
    assert activity["messageId"] != events[at]["messageId"]
    content = activity["content"]
    assert set(content) == {"result", "resourceUri", "serverHash", "serverId", "toolInput"}
    assert content["resourceUri"] == RESOURCE
    assert content["serverId"] == "r"
    assert content["serverHash"] == server_hash(spec)
    assert content["toolInput"] == {}
    time = content["result"]["structuredContent"]["time"]
    assert content["result"]["content"] == [{"type": "text", "text": time}]
    assert json.loads(events[at]["content"]) == {"time": time}
    return activity


async def test_get_time_over_stdio_emits_its_app_activity_after_the_result() -> None:
    spec = stdio_app_server("r")
    tools, events = await get_time_run(spec)
    assert [tool["function"]["name"] for tool in tools] == ["r__get-time"]
    check_activity(events, spec)


@pytest.mark.filterwarnings(HTTP_SDK_GENERATORS)
async def test_get_time_over_streamable_http_emits_its_app_activity() -> None:
    async with http_app_server() as url:
        spec = http_app_spec("r", url)
        _tools, events = await get_time_run(spec)
    check_activity(events, spec)


async def test_apps_off_emits_no_activity() -> None:
    _tools, events = await get_time_run(stdio_app_server("r", apps=False))
    assert "ACTIVITY_SNAPSHOT" not in [event["type"] for event in events]
