"""Runs over real parts: the demo MCP servers as stdio subprocesses, the fake OpenAI endpoint over loopback HTTP."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from tests.support import check_stream, open_manager, server_stats
from yao_actors.config import (
    AssistantSpec,
    Config,
    InMemoryTransport,
    ModelSpec,
    ServerRef,
    ServerSpec,
    StdioTransport,
)
from yao_actors.conversation import ConversationManager
from yao_actors.conversation.loop.fallback import FALLBACK_PROMPT
from yao_actors.errors import ErrorKind
from yao_actors.events import Outcome
from yao_actors.models.base import Completion, Model, ToolCall, Usage
from yao_actors.models.openai import OpenAIModel
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.testing import DemoModel, FakeToolCall, FunctionModel, Reply, open_fake_openai, stdio_test_server
from yao_actors.testing.servers import build_test_server


def demo_server(name: str) -> ServerSpec:
    return ServerSpec(name, StdioTransport(sys.executable, ("-m", f"yao_actors.demo.{name}")))


DEMO_SERVERS = {name: demo_server(name) for name in ("weather", "clothing")}


def in_memory_test_server(name: str) -> ServerSpec:
    """The test server in process: these tests are about the real HTTP model endpoint, not the MCP transport."""
    return ServerSpec(name, InMemoryTransport(build_test_server(name)))


@asynccontextmanager
async def open_real_manager(
    servers: Mapping[str, ServerSpec], model: Model, **options: Any
) -> AsyncIterator[tuple[Runtime, ConversationManager]]:
    """A runtime over real servers, and the conversations of one assistant ``a`` using all of them."""
    spec = AssistantSpec(id="a", model="m", servers=tuple(ServerRef(s) for s in servers), **options)
    async with (
        open_runtime(Config(servers=dict(servers))) as runtime,
        open_manager(runtime.servers, model, spec) as manager,
    ):
        yield runtime, manager


@pytest.mark.parametrize(
    ("question", "expect_in_answer"),
    [("北京今天适合穿什么?", ["北京", "3°C"]), ("What should I wear in Beijing today?", ["Beijing", "3°C"])],
)
async def test_demo_scenario_over_stdio(question: str, expect_in_answer: list[str]) -> None:
    with trio.fail_after(60):
        async with open_real_manager(DEMO_SERVERS, DemoModel()) as (_runtime, manager):
            result = await manager.run("a", question)
    check_stream(list(result.events))
    assert result.outcome is Outcome.ANSWERED
    assert [(r.server, r.tool, r.ok) for r in result.tool_results] == [
        ("weather", "get", True),
        ("clothing", "advise", True),
    ]
    assert result.tool_results[0].result["temp"] == 3
    for text in expect_in_answer:
        assert text in result.text
    chinese = any("\u4e00" <= ch <= "\u9fff" for ch in result.text)
    assert chinese == (question[0] == "北")
    kinds = [e["type"] for e in result.events]
    assert kinds.count("TOOL_CALL_RESULT") == 2
    assert kinds.count("TEXT_MESSAGE_CONTENT") > 1  # the answer streamed in pieces


def openai_model(base_url: str, **options: Any) -> OpenAIModel:
    spec = ModelSpec(id="m", provider="openai", base_url=base_url, model="fake", api_key_env=None, **options)
    return OpenAIModel(spec)


async def test_fake_openai_interleaved_calls_and_a_500_in_turn_two() -> None:
    calls = (
        FakeToolCall("s1__echo", json.dumps({"text": "a"}), "c1"),
        FakeToolCall("s2__add", json.dumps({"a": 1, "b": 2}), "c2"),
        FakeToolCall("s1__echo", json.dumps({"text": "b"}), "c3"),
    )
    script = [
        Reply(tool_calls=calls, interleave=True, chunk_size=3),
        Reply.http_error(500, "overloaded", retry_after="0"),
        Reply(text="a, 3 and b", chunk_size=3),
    ]
    servers = {name: in_memory_test_server(name) for name in ("s1", "s2")}
    with trio.fail_after(60):
        async with open_fake_openai(script) as fake:
            model = openai_model(fake.base_url, max_retries=2)
            async with open_real_manager(servers, model) as (_runtime, manager):
                result = await manager.run("a", "echo and add")
    check_stream(list(result.events))
    assert result.outcome is Outcome.ANSWERED
    assert result.text == "a, 3 and b"
    assert [(r.call_id, r.result) for r in result.tool_results] == [
        ("c1", {"text": "a"}),
        ("c2", {"sum": 3}),
        ("c3", {"text": "b"}),
    ]
    assert len(fake.requests) == 3  # the 500 was retried by the client
    turn_two = fake.requests[2].body["messages"]
    assert [m["role"] for m in turn_two] == ["user", "assistant", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in turn_two[2:]] == ["c1", "c2", "c3"]
    starts = [e["toolCallId"] for e in result.events if e["type"] == "TOOL_CALL_START"]
    assert starts == ["c1", "c2", "c3"]
    assert result.usage == Usage(20, 10, 30)


async def test_fake_openai_retries_exhausted_falls_back() -> None:
    def script(request: Any) -> Reply:
        messages = request.body["messages"]
        if messages[0]["content"] == FALLBACK_PROMPT:
            return Reply(text="synthesised from the results")
        if messages[-1]["role"] == "user":
            return Reply(tool_calls=(FakeToolCall("s1__echo", json.dumps({"text": "x"}), "c1"),))
        return Reply.http_error(500, "overloaded", retry_after="0")

    with trio.fail_after(60):
        async with open_fake_openai(script) as fake:
            model = openai_model(fake.base_url, max_retries=1)
            async with open_real_manager({"s1": in_memory_test_server("s1")}, model) as (_runtime, manager):
                result = await manager.run("a", "echo x")
    check_stream(list(result.events))
    assert result.outcome is Outcome.FALLBACK
    assert result.text == "synthesised from the results"
    assert result.note is not None
    assert "500" in result.note
    brief = fake.requests[-1].body["messages"][1]["content"]
    assert '### s1.echo\n```json\n{"text":"x"}\n```' in brief
    assert "tools" not in fake.requests[-1].body or not fake.requests[-1].body["tools"]


async def wait_for_stats(runtime: Runtime, check: Callable[[dict[str, Any]], bool]) -> None:
    """Poll the counters of server ``s1``: they live in another process, so there is nothing to wait on."""
    with trio.fail_after(10):
        while not check(dict(await server_stats(runtime.servers["s1"]))):  # noqa: ASYNC110
            await trio.sleep(0.01)


async def test_cancel_mid_batch_over_stdio_then_next_run_on_the_thread() -> None:
    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1] == {"role": "user", "content": "slow"}:
            return Completion(
                tool_calls=(
                    ToolCall("fast", "s1__echo", '{"text": "hi"}'),
                    ToolCall("slow", "s1__sleep", '{"seconds": 30}'),
                )
            )
        return f"history of {len(messages)} messages"

    model = FunctionModel(answer)
    with trio.fail_after(60):
        async with open_real_manager({"s1": stdio_test_server("s1")}, model) as (runtime, manager):
            async with manager.open_run("a", "slow", thread_id="t") as stream:
                events = []
                async for event in stream:
                    events.append(event)
                    if event["type"] == "TOOL_CALL_RESULT":
                        await wait_for_stats(runtime, lambda stats: stats["calls"].get("sleep") == 1)
                        stream.cancel()
            check_stream(events)
            assert events[-1]["outcome"] == {"type": "cancelled"}
            await wait_for_stats(runtime, lambda stats: stats["cancelled"] == 1)
            assert stream.result is not None
            assert [r.kind for r in stream.result.tool_results] == [None, ErrorKind.CANCELLED]
            after = await manager.run("a", "next", thread_id="t")
    assert after.outcome is Outcome.ANSWERED
    assert after.text == "history of 5 messages"
    assert [m["role"] for m in model.calls[-1].messages] == ["user", "assistant", "tool", "tool", "user"]
