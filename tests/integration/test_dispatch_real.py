"""Dispatch over real MCP transports: stdio subprocesses, streamable HTTP on loopback, in-memory SDK servers."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent

from tests.support import server_stats
from yao_actors.config import Config, HttpTransport, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.errors import ErrorKind
from yao_actors.models.base import ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing import open_http_test_server, stdio_test_server
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.catalog import build_catalog
from yao_actors.tools.dispatch import CallFinished, CallProgress, CallStarted, DispatchEvent, collect_tool_calls
from yao_actors.tools.results import tool_message_content
from yao_actors.tools.server_actor import ServerHandle


async def wait_for_cancelled(handle: ServerHandle, count: int) -> None:
    """Wait until the server counted ``count`` executions ended by ``notifications/cancelled``."""
    with trio.fail_after(10):
        # The count lives in the server; there is nothing to wait on but its answers.
        while (await server_stats(handle))["cancelled"] != count:  # noqa: ASYNC110
            await trio.sleep(0.1)


#: The MCP SDK's streamable-HTTP client leaves httpx2 stream generators unfinished when a session
#: ends; Trio reports them as garbage-collected async generators. Not a dispatch matter.
HTTP_SDK_GENERATORS = (
    "ignore:Exception ignored in. <async_generator object "
    "(Response.aiter_|PoolByteStream.__aiter__|EventSource.__aiter__):pytest.PytestUnraisableExceptionWarning"
)


@pytest.mark.filterwarnings(HTTP_SDK_GENERATORS)
async def test_a_batch_over_three_stdio_servers_and_one_http_server() -> None:
    with trio.fail_after(60):
        async with open_http_test_server("web") as web:
            specs = {name: stdio_test_server(name) for name in ("s1", "s2", "s3")}
            specs["web"] = ServerSpec("web", HttpTransport(await web.url()))
            async with open_runtime(Config(servers=specs)) as runtime:
                servers = runtime.servers
                catalog = await build_catalog([ServerRef(s) for s in servers], servers, max_tools=100)
                assert catalog.warnings == ()
                calls = [
                    ToolCall("a", "web__sleep", '{"seconds": 0.3}'),
                    ToolCall("b", "s1__sleep", '{"seconds": 0.3}'),
                    ToolCall("c", "s2__sleep", '{"seconds": 0.3}'),
                    ToolCall("d", "s3__sleep", '{"seconds": 0.3}'),
                    ToolCall("e", "s1__add", '{"a": 2, "b": 3}'),
                    ToolCall("f", "web__progress", '{"steps": 2}'),
                    ToolCall("g", "s2__add", '{"a": "two"}'),
                    ToolCall("h", "s3__missing", "{}"),
                    ToolCall("i", "s3__fail", '{"message": "no such city"}'),
                    ToolCall("j", "web__echo", '{"text": "hi"'),
                ]
                events: list[tuple[float, DispatchEvent]] = []

                async def on_event(event: DispatchEvent) -> None:
                    events.append((trio.current_time(), event))

                results = await collect_tool_calls(calls, catalog, servers, on_event=on_event)

                assert [r.call_id for r in results] == list("abcdefghij")
                assert [r.server for r in results] == ["web", "s1", "s2", "s3", "s1", "web", "s2", "", "s3", "web"]
                assert [r.result for r in results[:6]] == [{"slept": 0.3}] * 4 + [{"sum": 5}, {"steps": 2}]
                assert results[6].kind is ErrorKind.INVALID_ARGUMENTS
                assert results[6].error is not None
                assert "'b' is a required property" in results[6].error
                assert results[7].kind is ErrorKind.UNKNOWN_TOOL
                assert (results[8].kind, results[8].error, results[8].retryable) == (
                    ErrorKind.TOOL_ERROR,
                    "no such city",
                    True,
                )
                assert results[8].sequential_retry  # s3 ran sleep and fail concurrently
                assert (results[9].result, results[9].repaired) == ({"text": "hi"}, True)

                # Every server's sleep started before any of them finished: the groups ran at once.
                sleeps = {"a", "b", "c", "d"}
                started = [t for t, e in events if isinstance(e, CallStarted) and e.call.id in sleeps]
                finished = [t for t, e in events if isinstance(e, CallFinished) and e.result.call_id in sleeps]
                assert len(started) == 4
                assert max(started) < min(finished)
                assert [e.message for _, e in events if isinstance(e, CallProgress)] == [
                    "step 1 of 2",
                    "step 2 of 2",
                ]
                executed = (await server_stats(servers["s3"]))["calls"]
                assert executed == {"sleep": 1, "fail": 2}


async def test_a_slow_call_times_out_alone_and_the_server_stays_usable(autojump_clock: trio.testing.MockClock) -> None:
    slow = ServerSpec("slow", InMemoryTransport(build_test_server("slow")), timeout=5)
    other = ServerSpec("other", InMemoryTransport(build_test_server("other")))
    async with open_runtime(Config(servers={"slow": slow, "other": other})) as runtime:
        catalog = await build_catalog([ServerRef("slow"), ServerRef("other")], runtime.servers)
        calls = [
            ToolCall("1", "slow__sleep", '{"seconds": 60}'),
            ToolCall("2", "slow__sleep", '{"seconds": 1}'),
            ToolCall("3", "other__sleep", '{"seconds": 2}'),
        ]
        results = await collect_tool_calls(calls, catalog, runtime.servers)
        assert [r.kind for r in results] == [ErrorKind.TIMEOUT, None, None]
        await wait_for_cancelled(runtime.servers["slow"], 1)
        again = await collect_tool_calls([ToolCall("4", "slow__add", '{"a": 1, "b": 1}')], catalog, runtime.servers)
        assert again[0].result == {"sum": 2}


async def test_the_batch_deadline_cancels_on_the_server(autojump_clock: trio.testing.MockClock) -> None:
    spec = ServerSpec("m", InMemoryTransport(build_test_server("m")))
    async with open_runtime(Config(servers={"m": spec})) as runtime:
        catalog = await build_catalog([ServerRef("m")], runtime.servers)
        calls = [ToolCall("1", "m__sleep", '{"seconds": 30}'), ToolCall("2", "m__sleep", '{"seconds": 30}')]
        results = await collect_tool_calls(calls, catalog, runtime.servers, batch_timeout=3)
        assert [r.kind for r in results] == [ErrorKind.TIMEOUT, ErrorKind.TIMEOUT]
        await wait_for_cancelled(runtime.servers["m"], 2)
        (echo,) = await collect_tool_calls([ToolCall("3", "m__echo", '{"text": "up"}')], catalog, runtime.servers)
        assert echo.result == {"text": "up"}


def content_server() -> MCPServer:
    """Tools answering with the content shapes of the seed's ParsedContent rules (text parsed as JSON where it is,
    images as data, a single item unwrapped)."""
    server = MCPServer("content")

    def answer(*blocks: TextContent | ImageContent) -> CallToolResult:
        return CallToolResult(content=list(blocks))

    @server.tool()
    async def json_text() -> CallToolResult:
        return answer(TextContent(type="text", text='{"a":1}'))

    @server.tool()
    async def two_texts() -> CallToolResult:
        return answer(TextContent(type="text", text="plain"), TextContent(type="text", text="[1, 2]"))

    @server.tool()
    async def image() -> CallToolResult:
        return answer(ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"))

    @server.tool()
    async def empty_text() -> CallToolResult:
        return answer(TextContent(type="text", text=""))

    return server


async def test_results_follow_the_parsed_content_rules() -> None:
    spec = ServerSpec("c", InMemoryTransport(content_server()))
    with trio.fail_after(30):
        async with open_runtime(Config(servers={"c": spec})) as runtime:
            catalog = await build_catalog([ServerRef("c")], runtime.servers)
            names = ["json_text", "two_texts", "image", "empty_text"]
            calls = [ToolCall(str(i), f"c__{name}") for i, name in enumerate(names)]
            results = await collect_tool_calls(calls, catalog, runtime.servers)
    assert [r.result for r in results] == [
        {"a": 1},
        ["plain", [1, 2]],
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        None,
    ]
    assert [tool_message_content(r) for r in results] == [
        '{"a":1}',
        '["plain",[1,2]]',
        '"[image image/png, 8 B]"',  # never base64 in a tool message (issue 33): the event carries the data
        "null",
    ]
