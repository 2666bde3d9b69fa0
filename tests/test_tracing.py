"""Spans of runs, model calls and tool calls (GenAI conventions), recorded by the SDK's in-memory exporter.

The servers here are in-memory MCP servers; ``tests/integration/test_tracing_real.py`` runs the seed's demo over
stdio and a streamable HTTP server.
"""

from __future__ import annotations

import sys
from typing import Any

import attrs
import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.dispatch_support import catalog_of, scripted_server, serving
from tests.otel_support import is_descendant, named, nested, one, parent_of, spans
from yao_actors.config import AssistantSpec, Config, Hooks, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.errors import ErrorKind, ModelHTTPError
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall, Usage
from yao_actors.observability import tracing
from yao_actors.runtime import open_runtime
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.dispatch import collect_tool_calls

__all__ = ["spans"]  # the fixture, used by name


def config(model: str = "scripted", protocol: str = "auto", **assistant: Any) -> Config:
    servers = {"test": ServerSpec("test", InMemoryTransport(build_test_server()), protocol=protocol)}
    spec = AssistantSpec("helper", model, ("Be helpful.",), (ServerRef("test"),), **assistant)
    return Config(servers=servers, assistants={"helper": spec})


def scripted(*turns: Completion) -> FunctionModel:
    """A model answering the given completions in order, one per call."""
    answers = iter(turns)
    return FunctionModel(lambda messages, tools: next(answers), name="scripted")


def batch_then_answer(
    calls: tuple[ToolCall, ...], text: str, usage: tuple[Usage | None, Usage | None] = (None, None)
) -> FunctionModel:
    """A :func:`scripted` model making ``calls`` in one turn, then answering ``text``; ``usage``: what each of the
    two turns reports."""
    return scripted(Completion(tool_calls=calls, usage=usage[0]), Completion(text=text, usage=usage[1]))


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_span_tree_crosses_the_conversation_and_server_mailboxes(
    spans: InMemorySpanExporter, protocol: str
) -> None:
    calls = (
        ToolCall("c1", "test__echo", '{"text": "北京"}'),
        ToolCall("c2", "test__fail", '{"message": "no such city"}'),
    )
    model = batch_then_answer(calls, "北京今天晴。", usage=(Usage(10, 3, 13), Usage(20, 5, 25)))
    tracer = trace.get_tracer("test")
    with trio.fail_after(30):
        async with open_runtime(config(protocol=protocol), models={"scripted": model}) as runtime:
            with tracer.start_as_current_span("caller"):
                result = await runtime.run("helper", "北京今天适合穿什么?")
    assert result.outcome is Outcome.ANSWERED
    finished = spans.get_finished_spans()

    caller = one(finished, "caller")
    run = one(finished, "invoke_agent helper")
    assert parent_of(run, finished) is caller  # the caller's context crossed the conversation actor's mailbox
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "helper"
    assert run.attributes["gen_ai.conversation.id"] == result.thread_id
    assert run.attributes["yao.run.id"] == result.run_id
    assert run.attributes["yao.run.outcome"] == "answered"
    assert run.attributes["gen_ai.usage.input_tokens"] == 30
    assert run.attributes["gen_ai.usage.output_tokens"] == 8
    assert run.status.status_code is not StatusCode.ERROR
    # The failed call was retryable: run again alone (the sequential retry), then the model was asked again.
    assert [event.name for event in run.events] == ["yao.sequential_retry", "yao.tool_retry"]

    chats = named(finished, "chat scripted")
    assert len(chats) == 2
    for chat, (tokens_in, tokens_out) in zip(chats, [(10, 3), (20, 5)], strict=True):
        assert parent_of(chat, finished) is run
        assert chat.kind is SpanKind.CLIENT
        assert chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"]) == (
            tokens_in,
            tokens_out,
        )
    assert [chat.attributes["yao.step"] for chat in chats if chat.attributes] == ["turn 1", "retry 1"]

    echo = one(finished, "execute_tool test__echo")
    assert parent_of(echo, finished) is run
    assert echo.attributes is not None
    assert echo.attributes["gen_ai.operation.name"] == "execute_tool"
    assert echo.attributes["gen_ai.tool.name"] == "test__echo"
    assert echo.attributes["gen_ai.tool.call.id"] == "c1"
    assert echo.attributes["yao.mcp.server"] == "test"
    assert "error.type" not in echo.attributes
    assert echo.status.status_code is not StatusCode.ERROR

    concurrent, alone = named(finished, "execute_tool test__fail")
    for failed in (concurrent, alone):
        assert parent_of(failed, finished) is run
        assert failed.attributes is not None
        assert failed.attributes["error.type"] == "tool_error"
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.status.description == "no such city"
    assert alone.attributes is not None
    assert alone.attributes["yao.tool.sequential_retry"] is True

    # The MCP SDK's client span (a JSON-RPC connection's: an in-process server on 2026-07-28 is called
    # directly) runs in the server actor's worker task, yet descends from the tool span; the in-memory
    # server's own span, from the traceparent the request carried.
    if protocol == "legacy":
        send = one(finished, "MCP send tools/call echo")
        assert parent_of(send, finished) is echo
    served = one(finished, "tools/call echo")
    assert served.kind is SpanKind.SERVER
    assert is_descendant(served, echo, finished)
    of_the_run = [
        s for s in finished if s.name.startswith(("invoke_agent", "chat", "execute_tool", "MCP send tools/call"))
    ]
    assert caller.context is not None
    assert {span.context.trace_id for span in of_the_run if span.context} == {caller.context.trace_id}


async def test_unknown_tool_and_invalid_arguments_get_error_spans_without_reaching_a_server(
    spans: InMemorySpanExporter,
) -> None:
    model = batch_then_answer((ToolCall("c1", "test__nope", "{}"), ToolCall("c2", "test__add", '{"a": "one"}')), "done")
    with trio.fail_after(30):
        async with open_runtime(config(), models={"scripted": model}) as runtime:
            await runtime.run("helper", "add one and nothing")
    finished = spans.get_finished_spans()
    run = one(finished, "invoke_agent helper")
    unknown = one(finished, "execute_tool test__nope")
    invalid = one(finished, "execute_tool test__add")
    for span, kind in ((unknown, "unknown_tool"), (invalid, "invalid_arguments")):
        assert parent_of(span, finished) is run
        assert span.attributes is not None
        assert span.attributes["error.type"] == kind
        assert span.status.status_code is StatusCode.ERROR
    assert not named(finished, "MCP send tools/call add")


async def test_a_call_refused_before_its_server_gets_an_error_span_but_a_down_servers_call_none(
    spans: InMemorySpanExporter,
) -> None:
    calls = [ToolCall("c1", "a__nope", "{}"), ToolCall("c2", "a__echo", "{}"), ToolCall("c3", "down__echo", "{}")]
    async with serving(scripted_server("a")) as servers:
        catalog = attrs.evolve(await catalog_of(servers), unavailable={"down": "restarting"})
        results = await collect_tool_calls(calls, catalog, {})  # a's actor is not among the servers called
    kinds = [(r.kind, r.server) for r in results]
    unavailable = ErrorKind.SERVER_UNAVAILABLE
    assert kinds == [(ErrorKind.UNKNOWN_TOOL, ""), (unavailable, "a"), (unavailable, "down")]
    finished = spans.get_finished_spans()
    assert one(finished, "execute_tool a__nope").attributes["error.type"] == "unknown_tool"  # type: ignore[index]
    assert one(finished, "execute_tool a__echo").attributes["error.type"] == "server_unavailable"  # type: ignore[index]
    assert not named(finished, "execute_tool down__echo")  # its server is down: it was never to run now


async def test_a_failing_model_marks_its_chat_span_and_the_fallback_is_an_event(spans: InMemorySpanExporter) -> None:
    calls = 0

    def fn(messages: object, tools: object) -> Completion:
        nonlocal calls
        calls += 1
        if calls == 1:
            return Completion(tool_calls=(ToolCall("c1", "test__echo", '{"text": "x"}'),))
        if calls == 2:
            raise ModelHTTPError(503, "overloaded", url="http://127.0.0.1:1/v1")
        return Completion(text="the fallback answers")

    with trio.fail_after(30):
        async with open_runtime(config("flaky"), models={"flaky": FunctionModel(fn, name="flaky")}) as runtime:
            result = await runtime.run("helper", "hello")
    assert result.outcome is Outcome.FALLBACK, result.error
    finished = spans.get_finished_spans()
    run = one(finished, "invoke_agent helper")
    first, failed, fallback = named(finished, "chat flaky")
    assert first.status.status_code is not StatusCode.ERROR
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "http_503"
    assert failed.status.status_code is StatusCode.ERROR
    assert fallback.attributes is not None
    assert fallback.attributes["yao.step"] == "fallback"
    assert parent_of(fallback, finished) is run
    assert [event.name for event in run.events] == ["yao.fallback"]
    assert run.attributes is not None
    assert run.attributes["yao.run.outcome"] == "fallback"


async def test_a_run_that_errors_carries_its_code_as_error_type(spans: InMemorySpanExporter) -> None:
    model = scripted(*[Completion(tool_calls=(ToolCall(f"c{i}", "test__echo", '{"text": "x"}'),)) for i in range(9)])
    with trio.fail_after(30):
        async with open_runtime(config(max_turn=2, fallback=False), models={"scripted": model}) as runtime:
            result = await runtime.run("helper", "loop forever")
    assert result.outcome is Outcome.ERROR
    run = one(spans.get_finished_spans(), "invoke_agent helper")
    assert run.attributes is not None
    assert run.attributes["error.type"] == "max_turns"
    assert run.status.status_code is StatusCode.ERROR


def delegate_to_expert(ctx: object, messages: object) -> dict[str, str]:
    """A ``create`` hook handing the whole run to the ``expert`` assistant."""
    return {"delegate": "expert"}


async def test_a_delegated_assistant_is_an_invoke_agent_span_inside_the_run(spans: InMemorySpanExporter) -> None:
    base = config()
    front = AssistantSpec(
        "front", "scripted", (), (ServerRef("test"),), hooks=Hooks(create="tests.test_tracing:delegate_to_expert")
    )
    expert = AssistantSpec("expert", "scripted", (), (ServerRef("test"),))
    setup = Config(servers=base.servers, assistants={"front": front, "expert": expert})
    with trio.fail_after(30):
        async with open_runtime(setup, models={"scripted": scripted(Completion(text="专家说：晴"))}) as runtime:
            result = await runtime.run("front", "北京今天适合穿什么?")
    assert result.text == "专家说：晴"
    finished = spans.get_finished_spans()
    _, delegated = nested(finished, "invoke_agent front", "invoke_agent expert")
    assert delegated.attributes is not None
    assert delegated.attributes["gen_ai.agent.name"] == "expert"
    assert parent_of(one(finished, "chat scripted"), finished) is delegated


async def test_open_span_names_the_target_and_makes_its_attributes_when_spans_record(
    spans: InMemorySpanExporter,
) -> None:
    carried = tracing.capture()
    assert carried is not None
    with tracing.open_span("execute_tool", lambda: {tracing.TOOL_NAME: "s__t"}, target="s__t") as span:
        assert span.is_recording()
        with tracing.attached(carried):  # the carried context (outside the span) is current in the block
            assert tracing.current_span() is not span
        assert tracing.current_span() is span
    (finished,) = spans.get_finished_spans()
    assert finished.name == "execute_tool s__t"
    assert dict(finished.attributes or {}) == {tracing.TOOL_NAME: "s__t"}


#: In a fresh interpreter (no tracer provider): what open_span and attached are, and whether they build anything.
_OFF = """
from yao_actors.observability import tracing

def boom():
    raise AssertionError("attributes made while tracing is off")

assert not tracing.tracing_on()
assert tracing.open_span("execute_tool", boom, target="s__t") is tracing.NO_SPAN
with tracing.open_span("execute_tool", boom, target="s__t") as span:
    assert not span.is_recording()
assert tracing.capture() is None
assert tracing.attached(None) is tracing.attached(None)  # one shared block that does nothing
with tracing.attached(None):
    pass
print("ok")
"""


async def test_with_tracing_off_open_span_and_attached_make_nothing() -> None:
    done = await trio.run_process([sys.executable, "-c", _OFF], capture_stdout=True, capture_stderr=True, check=False)
    assert done.stdout.decode().strip() == "ok", done.stderr.decode()
