"""Values that reach a thread's history never break it (issue 9, item 2).

A lone surrogate (``"\\ud800"``, a valid JSON escape) cannot be encoded as
UTF-8. In a run's input, in a model's tool-call arguments or in a tool's
result it must not make the OpenAI client's request encoding fail (every later
run on the thread ended ``internal_error``) nor the events unencodable: the
model gets U+FFFD in its place.
"""

from __future__ import annotations

import json
from typing import Any

import trio
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from tests.integration.test_conversation_real import open_real_manager, openai_model
from tests.support import check_stream
from yao_actors.config import InMemoryTransport, ServerSpec
from yao_actors.events import Outcome
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai
from yao_actors.testing.servers import build_test_server


def _server_with_a_surrogate_result() -> MCPServer:
    """The test server plus ``raw``, whose text result is JSON holding the escape of a lone surrogate."""
    server = build_test_server("s1")

    @server.tool(description="Return JSON text with a lone surrogate escape in it.")
    async def raw() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text='{"r": "x\\ud800"}')])

    return server


def _encodable(events: Any) -> None:
    for event in events:
        json.dumps(event, ensure_ascii=False).encode("utf-8")


async def test_a_thread_with_lone_surrogates_keeps_working_against_a_real_http_model() -> None:
    calls = (
        FakeToolCall("s1__echo", '{"text": "a\ud800"}', "c1"),
        FakeToolCall("s1__raw", "{}", "c2"),
    )
    script = [Reply(tool_calls=calls), Reply(text="done \ud800 done"), Reply(text="still here")]
    servers = {"s1": ServerSpec("s1", InMemoryTransport(_server_with_a_surrogate_result()))}
    with trio.fail_after(60):
        async with (
            open_fake_openai(script) as fake,
            open_real_manager(servers, openai_model(fake.base_url)) as (_, manager),
        ):
            first = await manager.run("a", "hello \ud800", thread_id="t")
            second = await manager.run("a", "and now?", thread_id="t")
    for result in (first, second):
        check_stream(list(result.events))
        _encodable(result.events)
        assert result.outcome is Outcome.ANSWERED, result.error
    assert [r.result for r in first.tool_results] == [{"text": "a\ufffd"}, {"r": "x\ufffd"}]
    assert second.text == "still here"
    later = fake.requests[2].body["messages"]
    assert later[0] == {"role": "user", "content": "hello \ufffd"}
    assert [m["content"] for m in later if m["role"] == "tool"] == ['{"text":"a\ufffd"}', '{"r":"x\ufffd"}']
    assert later[1]["tool_calls"][0]["function"]["arguments"] == '{"text": "a\ufffd"}'
    assert later[4] == {"role": "assistant", "content": "done \ufffd done"}
    assert later[-1] == {"role": "user", "content": "and now?"}
