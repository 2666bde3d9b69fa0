"""MCP Apps with the official app servers from npm, over stdio and streamable HTTP: discovery, the activity a
call of a tool with an interface emits, stored with the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.apps_support import APP_URI
from tests.integration.apps_support import app_server_main, http_app_server, http_app_spec, node, stdio_app_server
from tests.integration.test_dispatch_real import HTTP_SDK_GENERATORS
from tests.integration.test_results_real import open_results_run
from tests.service.agui_support import post_agui, run_input
from tests.service.support import running_service
from tests.support import app_activity_after_result, check_stream
from yao_actors.cli import main
from yao_actors.config import AssistantSpec, Config, ServerRef, ServerSpec, StdioTransport
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing import FakeToolCall, FunctionModel, Reply
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
    at, activity = app_activity_after_result(events)
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


def test_tools_says_which_tools_have_an_app_and_who_may_call_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = {
        "apps": {"module": "tests.apps_support:build_app_server"},
        "time": {"command": node(), "args": [app_server_main("basic"), "--stdio"], "apps": False},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    assert main(["tools", "--config", str(path), "--json"]) == 0
    tools = {(t["server"], t["tool"]): t for t in json.loads(capsys.readouterr().out)["tools"]}
    assert tools["apps", "show"]["app"] == {"resourceUri": APP_URI, "visibility": ["model", "app"], "shown": True}
    assert tools["apps", "legacy"]["app"] == {"resourceUri": APP_URI, "visibility": ["model", "app"], "shown": True}
    assert tools["apps", "app_only"]["app"] == {"resourceUri": APP_URI, "visibility": ["app"], "shown": True}
    assert tools["apps", "app_only"]["offered"] == {}
    assert tools["apps", "app_only"]["not_offered"] == {"default": "only its app may call it (_meta.ui.visibility)"}
    assert tools["apps", "model_only"]["app"] == {"resourceUri": None, "visibility": ["model"], "shown": True}
    assert tools["apps", "plain"]["app"] is None
    assert tools["time", "get-time"]["app"] == {"resourceUri": RESOURCE, "visibility": ["model", "app"], "shown": False}
    assert main(["tools", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        f"apps.app_only\n  default: not offered: only its app may call it (_meta.ui.visibility)\n  app: {APP_URI}, called by its app only\n"
        in out
    )
    assert f"  app: {APP_URI}, called by the model and its app\n" in out
    assert (
        "apps.model_only\n  default: offered as apps__model_only\n  app: no interface, called by the model only\n"
        in out
    )
    assert f"  app: {RESOURCE}, called by the model and its app (not shown: the server's apps is off)\n" in out


def shows_and_asks_the_pid(messages: list[dict[str, Any]], tools: Any) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=[ToolCall("c1", "apps__show", {"value": 1}), ToolCall("c2", "apps__pid", {})])
    return "shown"


async def test_an_apps_call_goes_through_its_principals_own_connection() -> None:
    """A server with ``identity: "principal"`` over stdio: a process per principal; an app's call on alice's thread
    is served by alice's process, one on bob's by bob's."""
    spec = ServerSpec(
        "apps", StdioTransport(sys.executable, ("-m", "tests.apps_support")), identity="principal", connect_timeout=60
    )
    assistant = AssistantSpec(id="default", model="m", servers=(ServerRef("apps"),))
    config = Config(servers={"apps": spec}, assistants={"default": assistant})
    tokens = {"alice": "alice-token-of-16+!", "bob": "bob-token-of-16+!!!"}
    pids: dict[str, tuple[Any, Any]] = {}
    with trio.fail_after(60):
        async with (
            open_runtime(config, models={"m": FunctionModel(shows_and_asks_the_pid)}) as runtime,
            running_service(runtime, tokens=tokens) as service,
        ):
            for who, token in tokens.items():
                headers = {"authorization": f"Bearer {token}"}
                shown = await post_agui(
                    service.port, run_input("show", thread_id=who, run_id=f"r-{who}"), headers=headers
                )
                [in_run] = [e["content"] for e in shown.events if e.get("toolCallId") == "c2" and "content" in e]
                request = {"serverId": "apps", "method": "tools/call", "params": {"name": "pid", "arguments": {}}}
                body = run_input(thread_id=who, run_id=f"p-{who}", forwardedProps={"__proxiedMCPRequest": request})
                answered = await post_agui(service.port, body, headers=headers)
                pids[who] = (json.loads(in_run), answered.events[-1]["result"]["structuredContent"]["result"])
    assert pids["alice"][0] == pids["alice"][1]
    assert pids["bob"][0] == pids["bob"][1]
    assert pids["alice"][0] != pids["bob"][0]
