"""An app's proxied MCP requests (MCP Apps) on ``POST /agui`` and in a websocket ``run`` frame: answered as
``@ag-ui/mcp-apps-middleware`` answers them, through the path a model's call takes, and refused outside it."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from tests.apps_support import APP_HTML, APP_URI, MIME, build_app_server
from tests.otel_support import nested, spans
from tests.service.agui_support import post_agui, run_input
from tests.service.support import TERMINAL, receive, running_service, send
from yao_actors.cli.chat import chat, open_service_connection, page_url
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, ServiceSpec
from yao_actors.conversation.app_requests import AppRequest, AppRequestRefused
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service
from yao_actors.specs import StoreSpec
from yao_actors.testing import FunctionModel

__all__ = ["spans"]  # the fixture, used by name

ALICE, BOB = "alice-token-of-16+!", "bob-token-of-16+!!!"
AS_ALICE, AS_BOB = {"authorization": f"Bearer {ALICE}"}, {"authorization": f"Bearer {BOB}"}


def shows(messages: list[dict[str, Any]], tools: Any) -> Any:
    if messages[-1]["role"] == "user" and messages[-1]["content"].startswith("show"):
        return Completion(tool_calls=[ToolCall("c1", "apps__show", {"value": 21})])
    return "shown"


def config(tools: tuple[str, ...] = (), **server: Any) -> Config:
    servers = {
        "apps": ServerSpec("apps", InMemoryTransport(build_app_server(big=server.pop("big", 0))), **server),
        "other": ServerSpec("other", InMemoryTransport(build_app_server())),
    }
    refs = (ServerRef("apps", tools=tools), ServerRef("other"))
    assistant = AssistantSpec(id="default", model="m", servers=refs)
    service = ServiceSpec(max_frame_bytes=65536)  # what the runtime's results and answers are bounded by
    return Config(servers=servers, assistants={"default": assistant}, service=service)


@asynccontextmanager
async def shown_app(**server: Any) -> AsyncIterator[tuple[Runtime, Service]]:
    """A service whose thread ``t1`` (alice's) showed the app of server ``apps``."""
    async with (
        open_runtime(config(**server), models={"m": FunctionModel(shows)}) as runtime,
        running_service(runtime, tokens={"alice": ALICE, "bob": BOB}, max_frame_bytes=65536) as service,
    ):
        shown = await post_agui(service.port, run_input("show 21"), headers=AS_ALICE)
        assert "ACTIVITY_SNAPSHOT" in [event["type"] for event in shown.events]
        yield runtime, service


def proxied(method: str, params: dict[str, Any], *, server: str = "apps", thread: str = "t1") -> dict[str, Any]:
    request = {"serverId": server, "method": method, "params": params}
    return run_input(thread_id=thread, run_id="p1", forwardedProps={"__proxiedMCPRequest": request})


async def answer(service: Service, body: dict[str, Any], headers: dict[str, str] = AS_ALICE) -> Any:
    response = await post_agui(service.port, body, headers=headers)
    assert response.status == 200, response.body
    started, finished = response.events
    assert started == {"type": "RUN_STARTED", "threadId": body["threadId"], "runId": "p1"}
    assert finished["type"] == "RUN_FINISHED"
    assert (finished["threadId"], finished["runId"]) == (body["threadId"], "p1")
    return finished["result"]


async def test_the_app_reads_its_resource_and_calls_its_tools_and_nothing_joins_the_thread() -> None:
    with trio.fail_after(20):
        async with shown_app() as (runtime, service):
            before = (await runtime.history("t1", principal="alice")).to_wire()
            read = await answer(service, proxied("resources/read", {"uri": APP_URI}))
            called = await answer(service, proxied("tools/call", {"name": "app_only", "arguments": {"step": 1}}))
            shown = await answer(service, proxied("tools/call", {"name": "show", "arguments": {"value": 2}}))
            pinged = await answer(service, proxied("ping", {}))
            logged = await answer(service, proxied("notifications/message", {"level": "info", "data": "hi"}))
            after = (await runtime.history("t1", principal="alice")).to_wire()
    assert read["contents"] == [{"uri": APP_URI, "mimeType": MIME, "text": APP_HTML}]
    assert called["structuredContent"] == {"step": 2}
    assert shown["structuredContent"] == {"value": 2, "double": 4}
    assert "error" not in pinged
    assert logged == {"success": True}
    assert after == before


async def test_a_call_with_arguments_its_schema_refuses_is_refused_by_the_schema_gate() -> None:
    with trio.fail_after(20):
        async with shown_app() as (_runtime, service):
            result = await answer(service, proxied("tools/call", {"name": "app_only", "arguments": {"step": "x"}}))
    assert result["error"].startswith("tools/call 'app_only': invalid_arguments: ")
    assert "step" in result["error"]


@pytest.mark.parametrize(
    ("body", "headers", "refusal"),
    [
        pytest.param(
            proxied("tools/call", {"name": "model_only", "arguments": {}}),
            AS_ALICE,
            "tools/call: 'model_only' is not a tool of server 'apps' its app may call",
            id="model-only-tool",
        ),
        pytest.param(
            proxied("tools/call", {"name": "nope", "arguments": {}}),
            AS_ALICE,
            "tools/call: 'nope' is not a tool of server 'apps' its app may call",
            id="unknown-tool",
        ),
        pytest.param(
            proxied("tools/call", {"name": "app_only", "arguments": {"step": 1}}, server="other"),
            AS_ALICE,
            "no app of server 'other' was shown on thread 't1'",
            id="another-server",
        ),
        pytest.param(
            proxied("ping", {}, server="nowhere"),
            AS_ALICE,
            "Unknown server: nowhere (no server with apps)",
            id="unknown",
        ),
        pytest.param(
            proxied("resources/read", {"uri": APP_URI}),
            AS_BOB,
            "no thread 't1' is stored",
            id="another-principals-thread",
        ),
        pytest.param(
            proxied("resources/read", {"uri": "file:///etc/hostname"}),
            AS_ALICE,
            "resources/read: an app reads only ui:// resources of its server, not 'file:///etc/hostname'",
            id="not-a-ui-resource",
        ),
        pytest.param(
            proxied("tools/list", {}),
            AS_ALICE,
            "MCP method not allowed for an app: 'tools/list' (allowed: tools/call, resources/read, "
            "notifications/message, ping)",
            id="method-outside-the-list",
        ),
        pytest.param(
            run_input(thread_id="t1", run_id="p1", forwardedProps={"__proxiedMCPRequest": {"method": "ping"}}),
            AS_ALICE,
            "forwardedProps.__proxiedMCPRequest: names no server (serverId)",
            id="no-server",
        ),
    ],
)
async def test_what_an_app_may_not_ask_is_refused_saying_why(
    body: dict[str, Any], headers: dict[str, str], refusal: str
) -> None:
    with trio.fail_after(20):
        async with shown_app() as (_runtime, service):
            result = await answer(service, body, headers)
    assert result == {"error": refusal}


async def test_a_tool_the_assistants_tool_list_leaves_out_is_refused_to_its_app() -> None:
    with trio.fail_after(20):
        async with shown_app(tools=("show",)) as (_runtime, service):
            left_out = await answer(service, proxied("tools/call", {"name": "app_only", "arguments": {"step": 1}}))
            listed = await answer(service, proxied("tools/call", {"name": "show", "arguments": {"value": 2}}))
    assert left_out == {"error": "tools/call: 'app_only' is not a tool of server 'apps' its app may call"}
    assert listed["structuredContent"] == {"value": 2, "double": 4}


async def test_a_tool_that_needs_approval_is_refused_to_an_app() -> None:
    with trio.fail_after(20):
        async with shown_app(approval=frozenset({"app_only"})) as (_runtime, service):
            result = await answer(service, proxied("tools/call", {"name": "app_only", "arguments": {"step": 1}}))
    assert result == {"error": "tools/call: 'app_only' needs a person's approval, which an app's call cannot ask"}


async def test_a_resource_over_the_size_an_event_carries_is_refused() -> None:
    with trio.fail_after(20):
        async with shown_app(big=100_000) as (_runtime, service):
            result = await answer(service, proxied("resources/read", {"uri": "ui://big/app.html"}))
    assert result["error"].startswith("the answer to resources/read is ")
    assert result["error"].endswith(" bytes, over the 65536 allowed")


async def test_the_websocket_takes_the_same_request_in_a_run_frame() -> None:
    with trio.fail_after(20):
        async with shown_app() as (_runtime, service), open_service_connection(service.url, token=ALICE) as ws:
            body = proxied("resources/read", {"uri": APP_URI})
            frame = {"type": "run", "threadId": "t1", "runId": "p1", "messages": []}
            await send(ws, frame | {"forwardedProps": body["forwardedProps"]})
            started, finished = await receive(ws), await receive(ws)
    assert started == {"type": "RUN_STARTED", "threadId": "t1", "runId": "p1", "seq": 1}
    assert finished["type"] in TERMINAL
    assert finished["result"]["contents"][0]["text"] == APP_HTML
    assert json.dumps(finished["result"])


async def test_chat_says_a_result_has_an_interface_and_links_the_thread_in_the_page() -> None:
    out = io.StringIO()
    with trio.fail_after(20):
        async with (
            open_runtime(config(), models={"m": FunctionModel(shows)}) as runtime,
            running_service(runtime) as service,
        ):
            code = await chat("show 21", url=service.url, thread_id="a thread", out=out)
    assert code == 0
    page = service.url.replace("ws://", "http://")
    line = f"▣ this result has an interface (apps: {APP_URI}); open it in the page: {page}#thread=a%20thread\n"
    assert line in out.getvalue()
    assert out.getvalue().index("✓ apps__show") < out.getvalue().index(line)


def test_the_page_of_a_websocket_url() -> None:
    assert page_url("ws://127.0.0.1:8765/") == "http://127.0.0.1:8765/"
    assert page_url("wss://yao.example/chat") == "https://yao.example/chat"
    assert page_url("https://yao.example") == "https://yao.example/"


async def test_the_activity_is_stored_with_its_run_and_resume_replays_it_after_a_restart(tmp_path: Path) -> None:
    store = StoreSpec(type="sqlite", path=str(tmp_path / "threads.sqlite3"))
    with trio.fail_after(20):
        async with open_runtime(attrs.evolve(config(), store=store), models={"m": FunctionModel(shows)}) as runtime:
            live = [event async for event in await_run(runtime)]
        async with open_runtime(attrs.evolve(config(), store=store), models={"m": FunctionModel(shows)}) as runtime:
            history = (await runtime.history("t1")).to_wire()
            async with runtime.open_resume(history["runs"][0]["runId"]) as stream:
                replayed = [dict(event) async for event in stream]
    [activity] = [event for event in live if event["type"] == "ACTIVITY_SNAPSHOT"]
    assert [event for event in replayed if event["type"] == "ACTIVITY_SNAPSHOT"] == [activity]
    assert [event["type"] for event in replayed] == [event["type"] for event in live]


async def await_run(runtime: Runtime) -> AsyncIterator[dict[str, Any]]:
    async with runtime.open_run("default", "show 21", thread_id="t1") as stream:
        async for event in stream:
            yield dict(event)


async def test_a_thread_forgotten_and_made_again_without_the_app_is_refused() -> None:
    request = AppRequest("t1", "ping", {}, "apps")
    with trio.fail_after(20):
        async with shown_app() as (runtime, _service):
            assert await runtime.app_request(request, principal="alice") == {}
            assert await runtime.forget("t1", principal="alice")
            with pytest.raises(AppRequestRefused, match="no thread 't1' is stored"):
                await runtime.app_request(request, principal="alice")
            await runtime.run("default", "hello", thread_id="t1", principal="alice")
            with pytest.raises(AppRequestRefused, match="no app of server 'apps' was shown on thread 't1'"):
                await runtime.app_request(request, principal="alice")


def counted(server: str, method: str, outcome: str) -> float:
    labels = {"server": server, "method": method, "outcome": outcome}
    return REGISTRY.get_sample_value("yao_app_requests_total", labels) or 0.0


async def test_app_requests_are_counted_by_server_method_and_outcome() -> None:
    before = [counted("apps", "ping", "ok"), counted("apps", "other", "refused"), counted("", "ping", "refused")]
    with trio.fail_after(20):
        async with shown_app() as (_runtime, service):
            await answer(service, proxied("ping", {}))
            await answer(service, proxied("tools/list", {}))
            await answer(service, proxied("ping", {}, server="a made-up name"))
    after = [counted("apps", "ping", "ok"), counted("apps", "other", "refused"), counted("", "ping", "refused")]
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]


async def test_an_apps_call_keeps_its_servers_deadline(autojump_clock: trio.abc.Clock) -> None:
    with trio.fail_after(20):
        async with shown_app(timeout=0.2) as (_runtime, service):
            result = await answer(service, proxied("tools/call", {"name": "slow", "arguments": {"seconds": 30}}))
    assert result == {"error": "tools/call 'slow': timeout: tool 'slow' on server 'apps' timed out after 0.2s"}


async def test_an_apps_call_is_traced_as_an_app_request_around_its_execute_tool(
    spans: InMemorySpanExporter,
) -> None:
    request = AppRequest("t1", "tools/call", {"name": "app_only", "arguments": {"step": 1}}, "apps")
    with trio.fail_after(20):
        async with shown_app() as (runtime, _service):
            await runtime.app_request(request, principal="alice")
    outer, _ = nested(spans.get_finished_spans(), "app_request tools/call", "execute_tool apps__app_only")
    assert outer.attributes is not None
    assert outer.attributes["yao.app.method"] == "tools/call"
