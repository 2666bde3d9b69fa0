"""Traces of real runs: the seed's demo question over its stdio servers, and a streamable HTTP server that
receives the W3C trace context of its call."""

from __future__ import annotations

import json

import pytest
import trio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.otel_support import named, one, parent_of, spans
from yao_actors.config import AssistantSpec, Config, HttpTransport, ServerRef, ServerSpec, default_config
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing import open_http_test_server

__all__ = ["spans"]  # the fixture, used by name

SEED_QUESTION = "北京今天适合穿什么?"


async def test_the_seed_demo_question_makes_one_tree_across_the_actors(spans: InMemorySpanExporter) -> None:
    with trio.fail_after(60):
        async with open_runtime(default_config(environ={})) as runtime:
            result = await runtime.run("default", SEED_QUESTION)
    assert result.outcome is Outcome.ANSWERED
    finished = spans.get_finished_spans()

    run = one(finished, "invoke_agent default")
    assert run.parent is None
    assert run.attributes is not None
    assert run.attributes["gen_ai.conversation.id"] == result.thread_id
    assert run.attributes["yao.run.outcome"] == "answered"
    chats = [span for span in finished if span.name.startswith("chat ")]
    assert len(chats) == 3  # ask the weather, ask for advice, answer
    assert all(parent_of(chat, finished) is run for chat in chats)

    for flat, tool, call in zip(
        ["weather__get", "clothing__advise"], ["get", "advise"], result.tool_results, strict=True
    ):
        span = one(finished, f"execute_tool {flat}")
        assert parent_of(span, finished) is run
        assert span.attributes is not None
        assert span.attributes["gen_ai.tool.name"] == flat
        assert span.attributes["gen_ai.tool.call.id"] == call.call_id
        assert span.status.status_code is not StatusCode.ERROR
        # The stdio call itself runs in the server actor's task and still hangs under the tool span.
        assert parent_of(one(finished, f"MCP send tools/call {tool}"), finished) is span
    # Model calls and tool calls alternate in time as the seed's loop does: chat, tool, chat, tool, chat.
    in_order = sorted(
        [*chats, *named(finished, "execute_tool weather__get"), *named(finished, "execute_tool clothing__advise")],
        key=lambda s: s.start_time or 0,
    )
    assert [span.name.split()[0] for span in in_order] == ["chat", "execute_tool", "chat", "execute_tool", "chat"]


@pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")  # the SDK's, at close
async def test_a_streamable_http_server_receives_the_trace_context_of_its_call(spans: InMemorySpanExporter) -> None:
    def fn(messages: list[dict[str, object]], tools: object) -> Completion:
        if messages[-1]["role"] == "tool":
            return Completion(text=str(messages[-1]["content"]))
        return Completion(tool_calls=(ToolCall("c1", "remote__trace_context", "{}"),))

    with trio.fail_after(60):
        async with open_http_test_server("remote") as server:
            url = await server.url()
            config = Config(
                servers={"remote": ServerSpec("remote", HttpTransport(url))},
                assistants={"a": AssistantSpec("a", "fn", (), (ServerRef("remote"),))},
            )
            async with open_runtime(config, models={"fn": FunctionModel(fn, name="fn")}) as runtime:
                result = await runtime.run("a", "which trace am I in?")
    received = json.loads(result.text)
    finished = spans.get_finished_spans()
    tool = one(finished, "execute_tool remote__trace_context")
    send = one(finished, "MCP send tools/call trace_context")
    assert parent_of(send, finished) is tool
    assert send.context is not None
    version, trace_id, parent_id, flags = received["traceparent"].split("-")
    assert version == "00"
    assert int(flags, 16) & 1  # sampled
    assert int(trace_id, 16) == send.context.trace_id
    assert int(parent_id, 16) == send.context.span_id
