"""MCP Apps against the official Node packages: ``@ag-ui/mcp-apps-middleware`` in front of the same app server
emits the activity ours does (field by field), and the official ``@ag-ui/client`` reads the app's resource and calls
its tool through the proxy of a real ``server.py`` process."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.apps_support import NODE_DIR, app_server_main, http_app_server, http_app_spec, node
from tests.integration.processes import server_py, write_config
from tests.integration.test_dispatch_real import HTTP_SDK_GENERATORS
from tests.integration.test_results_real import open_results_run
from tests.support import check_stream
from yao_actors.events import parse_event
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai

pytestmark = pytest.mark.filterwarnings(HTTP_SDK_GENERATORS)

BUDGET_URI = "ui://budget-allocator/mcp-app.html"


async def node_json(script: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run ``tests/node/<script>`` with ``spec``; its one JSON line."""
    done = await trio.run_process(
        [node(), script, json.dumps(spec)], cwd=NODE_DIR, capture_stdout=True, capture_stderr=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    output: dict[str, Any] = json.loads(done.stdout)
    assert output.get("error") is None, (output["error"], done.stderr.decode())
    return output


def the_activity(events: list[dict[str, Any]]) -> dict[str, Any]:
    [activity] = [event for event in events if event["type"] == "ACTIVITY_SNAPSHOT"]
    return activity


async def both_activities(name: str, server_id: str, tool: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The activity of one call of ``tool`` of app server ``name`` (over streamable HTTP): the middleware's, ours."""
    async with http_app_server(name) as url:
        spec = {"url": url, "serverId": server_id, "tool": tool, "arguments": {}}
        theirs = the_activity((await node_json("apps_middleware.mjs", spec))["events"])
        script = [Reply(tool_calls=(FakeToolCall(f"r__{tool}", "{}", "c1"),)), Reply(text="done")]
        async with open_results_run(script, http_app_spec(server_id, url)) as (_fake, manager):
            result = await manager.run("a", "go")
    check_stream(list(result.events))
    return theirs, the_activity(list(result.events))


async def test_the_middlewares_activity_and_ours_are_the_same_field_by_field() -> None:
    with trio.fail_after(120):
        theirs, ours = await both_activities("budget", "r", "get-budget-data")
    for field in ("type", "activityType", "replace"):
        assert ours[field] == theirs[field], field
    assert set(ours["content"]) == set(theirs["content"])
    for field in ("resourceUri", "serverHash", "serverId", "toolInput"):
        assert ours["content"][field] == theirs["content"][field], field
    assert ours["content"]["resourceUri"] == BUDGET_URI
    mine, official = ours["content"]["result"], theirs["content"]["result"]
    assert set(mine) == set(official) == {"content", "structuredContent"}
    assert mine["content"] == official["content"]
    for key in official["structuredContent"]:
        assert mine["structuredContent"][key] == official["structuredContent"][key], key


async def test_basic_get_time_has_the_middlewares_activity_but_the_time() -> None:
    with trio.fail_after(120):
        theirs, ours = await both_activities("basic", "r", "get-time")
    mine, official = ours["content"].pop("result"), theirs["content"].pop("result")
    assert ours["content"] == theirs["content"]
    assert set(mine) == set(official)
    assert set(mine["structuredContent"]) == set(official["structuredContent"]) == {"time"}
    assert mine["content"] == [{"type": "text", "text": mine["structuredContent"]["time"]}]


#: By app server: its tool with an interface, the tool's resource, and a key of its structured result.
APPS = {
    "basic": ("get-time", "ui://get-time/mcp-app.html", "time"),
    "budget": ("get-budget-data", BUDGET_URI, "config"),
}


@asynccontextmanager
async def app_server_config(name: str, transport: str) -> AsyncIterator[dict[str, Any]]:
    """The ``mcpServers`` entry of app server ``name`` (as ``app``) over ``transport`` (stdio, or streamable HTTP:
    the server then runs for the block)."""
    if transport == "stdio":
        yield {"app": {"command": node(), "args": [app_server_main(name), "--stdio"]}}
    else:
        async with http_app_server(name) as url:
            yield {"app": {"url": url}}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("name", ["basic", "budget"])
async def test_the_official_client_reads_the_app_and_calls_its_tool_through_the_proxy(
    tmp_path: Path, name: str, transport: str
) -> None:
    tool, uri, key = APPS[name]
    script = [Reply(tool_calls=(FakeToolCall(f"app__{tool}", "{}", "c1"),)), Reply(text="here it is")]
    requests = [
        {"serverId": "app", "method": "resources/read", "params": {"uri": uri}},
        {"serverId": "app", "method": "tools/call", "params": {"name": tool, "arguments": {}}},
        {"serverId": "app", "method": "tools/list", "params": {}},
        {"serverId": "nowhere", "method": "ping", "params": {}},
    ]
    with trio.fail_after(120):
        async with open_fake_openai(script) as fake, app_server_config(name, transport) as servers:
            config = write_config(tmp_path, fake.base_url, servers)
            async with server_py("--config", str(config), "--port", "0") as (_process, banner):
                match = re.search(r"http://127\.0\.0\.1:\d+", banner)
                assert match, banner
                spec = {"url": f"{match.group()}/agui", "threadId": "t1", "question": "go", "requests": requests}
                seen = await node_json("apps_proxy.mjs", spec)
        asked = len(fake.requests)
    for event in seen["events"]:
        parse_event(event)
    activity = the_activity(seen["events"])
    assert (activity["content"]["serverId"], activity["content"]["resourceUri"]) == ("app", uri)
    read, called, listed, unknown = seen["answers"]
    [page] = read["contents"]
    assert page["uri"] == uri
    assert page["mimeType"] == "text/html;profile=mcp-app"
    assert page["text"].lstrip().lower().startswith("<!doctype html>")
    assert set(called["structuredContent"]) == set(activity["content"]["result"]["structuredContent"])
    assert key in called["structuredContent"]
    assert listed == {"error": "MCP method not allowed for an app: 'tools/list' (allowed: tools/call, resources/read, "
                      "notifications/message, ping)"}  # fmt: skip
    assert unknown == {"error": "Unknown server: nowhere (no server with apps)"}
    for events in seen["proxyEvents"]:
        assert [event["type"] for event in events] == ["RUN_STARTED", "RUN_FINISHED"]
    assert asked == 2  # the model was asked for the run only, never for the app's requests
