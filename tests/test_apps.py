"""MCP Apps: what a tool's ``_meta.ui`` declares, the catalog it makes, the extension the client declares, and the
activity a call of a tool with an interface emits."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import mcp.types
import pytest
import trio

from tests.apps_support import APP_URI, build_app_server
from tests.support import app_activity_after_result, check_stream, open_manager
from yao_actors.config import AssistantSpec, Config, HttpTransport, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation.app_requests import AppRequestRefused, ShownApps
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.store.memory.store import MemoryStore
from yao_actors.store.records import EncodedEvent, RunStatus
from yao_actors.testing import FunctionModel
from yao_actors.tools.apps import NO_INTERFACE, ToolInterface, mcp_result, server_hash, tool_interface
from yao_actors.tools.catalog import build_catalog


def with_meta(meta: Any) -> mcp.types.Tool:
    return mcp.types.Tool(name="t", input_schema={"type": "object"}, _meta=meta)


def test_a_tools_interface_and_visibility() -> None:
    assert tool_interface(with_meta({"ui": {"resourceUri": "ui://a/b"}})) == ToolInterface("ui://a/b")
    assert tool_interface(with_meta({"ui/resourceUri": "ui://a/b"})) == ToolInterface("ui://a/b")
    app_only = tool_interface(with_meta({"ui": {"resourceUri": "ui://a", "visibility": ["app"]}}))
    assert (app_only.for_model, app_only.for_app) == (False, True)
    model_only = tool_interface(with_meta({"ui": {"visibility": ["model"]}}))
    assert (model_only.resource_uri, model_only.for_model, model_only.for_app) == (None, True, False)


def test_what_is_not_an_interface_is_ignored() -> None:
    for meta in (
        None,
        {"ui": {"resourceUri": "https://example.com/app.html"}},
        {"ui": {"resourceUri": "ui://"}},
        {"ui": {"resourceUri": 3}},
        {"ui": "ui://a"},
        {"ui": {"visibility": "app"}},
        {"ui": {"visibility": []}},
        {"ui": {"visibility": [1]}},
    ):
        assert tool_interface(with_meta(meta)) == NO_INTERFACE, meta
    assert tool_interface(with_meta({"ui": {"resourceUri": "file:///x", "visibility": ["app"]}})) == ToolInterface(
        None, frozenset({"app"})
    )


def test_the_server_hash_is_the_middlewares_for_a_server_reached_by_url() -> None:
    url = "http://127.0.0.1:3001/mcp"
    expected = hashlib.md5(b'{"type":"http","url":"http://127.0.0.1:3001/mcp"}').hexdigest()
    assert server_hash(ServerSpec("s", HttpTransport(url))) == expected
    assert server_hash(ServerSpec("a", InMemoryTransport(None))) != server_hash(
        ServerSpec("b", InMemoryTransport(None))
    )


def app_spec(server_id: str = "apps", **options: Any) -> ServerSpec:
    return ServerSpec(server_id, InMemoryTransport(build_app_server()), **options)


async def test_the_model_is_never_offered_a_tool_only_its_app_may_call() -> None:
    for apps in (True, False):
        async with open_runtime(Config(servers={"apps": app_spec(apps=apps)})) as runtime:
            catalog = await build_catalog((ServerRef("apps"),), runtime.servers)
        offered = {entry.tool: entry.interface.resource_uri for entry in catalog}
        expected = {"show": APP_URI, "model_only": None, "legacy": APP_URI, "plain": None, "capabilities": None}
        expected |= {"pid": None}
        assert offered == (expected if apps else dict.fromkeys(expected))


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_the_client_declares_the_ui_extension_only_with_apps_on(protocol: str) -> None:
    # On 2026-07-28 the tasks extension is declared too (the server's tasks: "auto"), whatever apps says.
    tasks = {"io.modelcontextprotocol/tasks": {}} if protocol == "2026-07-28" else {}
    for apps, declared in ((True, {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}),
                           (False, {})):  # fmt: skip
        async with open_runtime(Config(servers={"apps": app_spec(apps=apps, protocol=protocol)})) as runtime:
            outcome = await runtime.servers["apps"].call_tool("capabilities", {})
        assert outcome.result == {"extensions": {**tasks, **declared}}


def calls_show(value: int) -> FunctionModel:
    def play(messages: list[dict[str, Any]], tools: Any) -> Any:
        if messages[-1]["role"] == "user":
            return Completion(tool_calls=[ToolCall("c1", "apps__show", {"value": value})])
        return "shown"

    return FunctionModel(play)


async def run_show(**options: Any) -> list[dict[str, Any]]:
    assistant = AssistantSpec(id="a", model="m", servers=(ServerRef("apps"),))
    with trio.fail_after(20):
        async with (
            open_runtime(Config(servers={"apps": app_spec(**options)})) as runtime,
            open_manager(runtime.servers, calls_show(21), assistant) as manager,
        ):
            result = await manager.run("a", "show 21")
    check_stream(list(result.events))
    return list(result.events)


async def test_a_call_of_a_tool_with_an_interface_is_followed_by_its_activity() -> None:
    events = await run_show()
    _, activity = app_activity_after_result(events)
    content = activity["content"]
    assert content.pop("result") | {"_meta": None} == {
        "content": [{"type": "text", "text": '{\n  "value": 21,\n  "double": 42\n}'}],
        "structuredContent": {"value": 21, "double": 42},
        "isError": False,
        "resultType": "complete",  # the in-process server speaks 2026-07-28
        "_meta": None,
    }
    assert content == {
        "resourceUri": APP_URI,
        "serverHash": server_hash(app_spec()),
        "serverId": "apps",
        "toolInput": {"value": 21},
    }
    assert [event["type"] for event in events].count("ACTIVITY_SNAPSHOT") == 1


async def test_apps_off_the_call_has_no_activity() -> None:
    events = await run_show(apps=False)
    assert "ACTIVITY_SNAPSHOT" not in [event["type"] for event in events]


async def test_an_activity_over_the_size_an_event_carries_is_left_out_saying_so() -> None:
    assistant = AssistantSpec(id="a", model="m", servers=(ServerRef("apps"),))
    with trio.fail_after(20):
        async with (
            open_runtime(Config(servers={"apps": app_spec()})) as runtime,
            open_manager(runtime.servers, calls_show(21), assistant, media_bytes=100) as manager,
        ):
            result = await manager.run("a", "show 21")
    events = list(result.events)
    check_stream(events)
    kinds = [event["type"] for event in events]
    assert "ACTIVITY_SNAPSHOT" not in kinds
    at = kinds.index("TOOL_CALL_RESULT")
    status = events[at + 1]["value"]
    assert (status["server"], status["state"]) == ("apps", "app_result_too_large")
    assert status["detail"].startswith(f"the result for the app of {APP_URI} is ")
    assert status["detail"].endswith(" bytes, over the 100 an event carries")


def test_a_result_for_an_app_keeps_what_the_server_sent_and_only_that() -> None:
    sent = {
        "contents": [
            {
                "uri": APP_URI,
                "mimeType": "text/html;profile=mcp-app",
                "text": "<p>\ud800</p>",
                "_meta": {"ui": {"csp": {"connectDomains": ["https://api.example"]}, "prefersBorder": True}},
            }
        ]
    }
    kept = mcp_result(mcp.types.ReadResourceResult.model_validate(sent))
    assert kept == {
        "contents": [
            {
                "uri": APP_URI,
                "mimeType": "text/html;profile=mcp-app",
                "text": "<p>\ufffd</p>",  # a lone surrogate cannot go out as text
                "_meta": {"ui": {"csp": {"connectDomains": ["https://api.example"]}, "prefersBorder": True}},
            }
        ]
    }


class _CountingStore(MemoryStore):
    """A memory store that counts the runs whose events are read."""

    reads: list[str]

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        self.reads.append(f"{run_id}>{after_seq}")
        return await super().read_events(run_id, after_seq)


async def _run_events(store: MemoryStore, run_id: str, events: list[dict[str, Any]], *, finish: bool) -> None:
    encoded = [EncodedEvent(event["seq"], json.dumps(event)) for event in events]
    await store.append_turn("t", run_id, [], encoded)
    if finish:
        await store.finish_run(run_id, status=RunStatus.FINISHED, outcome="answered")


async def test_a_refused_apps_request_reads_only_what_the_thread_got_since_the_last_one() -> None:
    store = _CountingStore()
    store.reads = []
    shown = ShownApps()
    activity = {"type": "ACTIVITY_SNAPSHOT", "activityType": "mcp-apps", "content": {"serverId": "apps"}}
    await store.open_thread("t", "alice")
    for run_id in ("r1", "r2"):
        await store.start_run("t", run_id, "default", [])
        await _run_events(store, run_id, [{"type": "RUN_STARTED", "seq": 1}], finish=True)
    await store.start_run("t", "r3", "other", [])  # still running
    await _run_events(store, "r3", [{"type": "RUN_STARTED", "seq": 1}], finish=False)
    for _ in range(2):
        with pytest.raises(AppRequestRefused, match="no app of server 'apps' was shown on thread 't'"):
            await shown.assistant(store, "t", "alice", "apps")
    assert store.reads == ["r3>0", "r2>0", "r1>0", "r3>1"]  # the second time: only what the running run adds
    store.reads.clear()
    await _run_events(store, "r3", [{"seq": 2, **activity}], finish=False)
    assert await shown.assistant(store, "t", "alice", "apps") == "other"
    assert await shown.assistant(store, "t", "alice", "apps") == "other"  # found: remembered
    assert store.reads == ["r3>1"]
