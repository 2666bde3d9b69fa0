"""The OpenAI-compatible client against the fake endpoint over real loopback HTTP, plus its SSE decoder.

Tests about waiting (backoff, ``Retry-After``, deadlines) run under the
``autojump_clock``: the fake lives in the same Trio run, so virtual time jumps
over every sleep and the assertions are about virtual time, never wall time.
"""

from __future__ import annotations

import functools
import gc
import json
import socket
from typing import Any

import attrs
import httpx2
import pytest
import trio
import trio.lowlevel
from hypothesis import given
from hypothesis import strategies as st

from yao_actors.config import ModelSpec
from yao_actors.config.providers import build_model, default_model_spec
from yao_actors.demo.model import DemoModel
from yao_actors.errors import ModelError, ModelHTTPError, ModelStreamError, ModelTimeout
from yao_actors.models import (
    Completion,
    Delta,
    OpenAIModel,
    ReasoningDelta,
    TestModel,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from yao_actors.models.openai import _Relay
from yao_actors.models.sse import ServerSentEvent, SSEDecoder
from yao_actors.testing import FakeToolCall, Reply, open_fake_openai

MESSAGES = [{"role": "user", "content": "Hello"}]
TOOL = {"type": "function", "function": {"name": "weather__get", "parameters": {"type": "object"}}}


def _spec(base_url: str, **changes: Any) -> ModelSpec:
    spec = ModelSpec(id="m", provider="openai", base_url=base_url, model="gpt-test", api_key_env=None)
    return attrs.evolve(spec, **changes)


async def _complete(
    script: Any, tools: Any = (), **changes: Any
) -> tuple[Completion | BaseException, list[Delta], Any]:
    """Run one completion against a fake playing ``script``: (completion or error, deltas, the fake)."""
    deltas: list[Delta] = []

    async def on_delta(delta: Delta) -> None:
        deltas.append(delta)

    with trio.fail_after(120):
        async with open_fake_openai(script) as fake:
            model = OpenAIModel(_spec(fake.base_url, **changes), api_key="sk-test")
            try:
                result: Completion | BaseException = await model.complete(MESSAGES, list(tools), on_delta=on_delta)
            except ModelError as exc:
                result = exc
    return result, deltas, fake


# --------------------------------------------------------------------------- answers


async def test_text_streams_as_deltas_with_usage() -> None:
    completion, deltas, fake = await _complete([Reply(text="Hello, world!", chunk_size=3, usage=Usage(7, 4, 11))])
    assert completion == Completion(text="Hello, world!", finish_reason="stop", usage=Usage(7, 4, 11))
    assert deltas == [TextDelta(piece) for piece in ("Hel", "lo,", " wo", "rld", "!")]
    (request,) = fake.requests
    assert request.body == {
        "model": "gpt-test",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert request.headers["authorization"] == "Bearer sk-test"


async def test_params_headers_and_tools_go_into_the_request() -> None:
    params = {"temperature": 0.2, "parallel_tool_calls": False, "stream_options": None}
    _completion, _deltas, fake = await _complete(
        [Reply(text="ok")], tools=[TOOL], params=params, headers={"X-Org": "acme"}
    )
    body = fake.requests[0].body
    assert body["tools"] == [TOOL]
    assert body["temperature"] == 0.2
    assert body["parallel_tool_calls"] is False
    assert "stream_options" not in body
    assert fake.requests[0].headers["x-org"] == "acme"


async def test_api_key_is_read_from_the_configured_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    with trio.fail_after(20):
        async with open_fake_openai([Reply(text="ok")]) as fake:
            await OpenAIModel(_spec(fake.base_url, api_key_env="MY_KEY")).complete(MESSAGES, [])
    assert fake.requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_one_tool_call() -> None:
    reply = Reply(tool_calls=(FakeToolCall("weather__get", '{"city": "Beijing"}', id="call_1"),))
    completion, deltas, _fake = await _complete([reply], tools=[TOOL])
    assert completion.tool_calls == (ToolCall("call_1", "weather__get", '{"city": "Beijing"}'),)
    assert completion.finish_reason == "tool_calls"
    assert deltas[0] == ToolCallDelta(index=0, id="call_1", name="weather__get")
    assert "".join(d.arguments for d in deltas if isinstance(d, ToolCallDelta)) == '{"city": "Beijing"}'


async def test_three_interleaved_tool_calls_are_assembled_by_index() -> None:
    calls = (
        FakeToolCall("a__one", '{"n": 1, "text": "first"}'),
        FakeToolCall("b__two", '{"n": 2, "text": "second"}'),
        FakeToolCall("c__three", '{"n": 3, "text": "third"}'),
    )
    completion, deltas, _fake = await _complete([Reply(tool_calls=calls, interleave=True, chunk_size=5)])
    assert isinstance(completion, Completion)
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [(c.name, c.arguments) for c in calls]
    assert [c.id for c in completion.tool_calls] == ["call_fake_1_0", "call_fake_1_1", "call_fake_1_2"]
    indices = [d.index for d in deltas if isinstance(d, ToolCallDelta)]
    assert indices[:6] == [0, 1, 2, 0, 1, 2]
    for index, call in enumerate(calls):
        fragments = [d.arguments for d in deltas if isinstance(d, ToolCallDelta) and d.index == index]
        assert "".join(fragments) == call.arguments


async def test_reasoning_content_is_passed_through() -> None:
    completion, deltas, _fake = await _complete([Reply(reasoning="Think first.", text="Answer.", chunk_size=6)])
    assert isinstance(completion, Completion)
    assert completion.reasoning == "Think first."
    assert completion.text == "Answer."
    assert deltas[:2] == [ReasoningDelta("Think "), ReasoningDelta("first.")]
    assert completion.to_message()["reasoning_content"] == "Think first."


async def test_malformed_tool_arguments_are_passed_on_verbatim() -> None:
    reply = Reply(tool_calls=(FakeToolCall("weather__get", '{"city": "Bei'),))
    completion, _deltas, _fake = await _complete([reply])
    assert isinstance(completion, Completion)
    assert completion.tool_calls[0].arguments == '{"city": "Bei'


async def test_non_streaming_endpoint_still_reports_deltas() -> None:
    reply = Reply(text="Whole answer.", tool_calls=(FakeToolCall("weather__get", '{"city": "Tokyo"}', id="c9"),))
    completion, deltas, fake = await _complete([reply], stream=False)
    assert completion == Completion(
        text="Whole answer.",
        tool_calls=(ToolCall("c9", "weather__get", '{"city": "Tokyo"}'),),
        finish_reason="tool_calls",
        usage=Usage(10, 5, 15),
    )
    assert deltas == [
        TextDelta("Whole answer."),
        ToolCallDelta(index=0, id="c9", name="weather__get", arguments='{"city": "Tokyo"}'),
    ]
    assert "stream" not in fake.requests[0].body
    assert fake.requests[0].headers["accept"] == "application/json"


# --------------------------------------------------------------------------- faults and retries


async def test_500_is_retried_then_succeeds(autojump_clock: trio.abc.Clock) -> None:
    completion, deltas, fake = await _complete([Reply.http_error(500), Reply.http_error(502), Reply(text="ok")])
    assert isinstance(completion, Completion)
    assert completion.text == "ok"
    assert deltas == [TextDelta("ok")]
    assert len(fake.requests) == 3


async def test_429_retry_after_is_honoured(autojump_clock: trio.abc.Clock) -> None:
    start = trio.current_time()
    completion, _deltas, fake = await _complete(
        [Reply.http_error(429, "rate limited", retry_after="7"), Reply(text="ok")]
    )
    assert isinstance(completion, Completion)
    assert len(fake.requests) == 2
    assert trio.current_time() - start >= 7


async def test_retry_budget_exhausted_gives_the_endpoints_error(autojump_clock: trio.abc.Clock) -> None:
    script = [Reply.http_error(503, "overloaded, try later", retry_after="2")] * 10
    error, deltas, fake = await _complete(script, max_retries=10, retry_budget=5)
    assert isinstance(error, ModelHTTPError)
    assert (error.status, error.message) == (503, "overloaded, try later")
    assert deltas == []
    # Attempts at t=0, 2 and 4; a fourth at t=6 would pass the 5-second budget.
    assert len(fake.requests) == 3


async def test_retry_count_exhausted(autojump_clock: trio.abc.Clock) -> None:
    error, _deltas, fake = await _complete([Reply.http_error(500, "boom")] * 10, max_retries=2)
    assert isinstance(error, ModelHTTPError)
    assert error.status == 500
    assert len(fake.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_4xx_is_not_retried_and_carries_the_endpoints_message(status: int) -> None:
    error, _deltas, fake = await _complete([Reply.http_error(status, "model 'gpt-test' does not exist")])
    assert isinstance(error, ModelHTTPError)
    assert error.status == status
    assert error.message == "model 'gpt-test' does not exist"
    assert "does not exist" in str(error)
    assert len(fake.requests) == 1


async def test_stall_mid_stream_fires_the_read_deadline(autojump_clock: trio.abc.Clock) -> None:
    error, deltas, fake = await _complete([Reply(text="Hello there", stall_after=3, chunk_size=2)], read_timeout=5)
    assert isinstance(error, ModelTimeout)
    # The deltas before the stall were relayed as they came, not held back for the end.
    assert deltas == [TextDelta("He"), TextDelta("ll")]
    assert len(fake.requests) == 1


async def test_no_response_headers_fires_the_connect_deadline(autojump_clock: trio.abc.Clock) -> None:
    with trio.fail_after(60):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        model = OpenAIModel(_spec(f"http://127.0.0.1:{port}/v1", connect_timeout=3))
        with pytest.raises(ModelTimeout):
            await model.complete(MESSAGES, [])
        for listener in listeners:
            await listener.aclose()


async def test_stream_cut_before_done_is_an_error() -> None:
    error, deltas, fake = await _complete([Reply(text="Hello there", cut_after=3, chunk_size=2)])
    assert isinstance(error, ModelStreamError)
    assert deltas == [TextDelta("He"), TextDelta("ll")]
    assert len(fake.requests) == 1


async def test_connection_dropped_after_deltas_is_an_error_not_a_replay() -> None:
    error, deltas, fake = await _complete([Reply(text="Hello there", drop_after=3, chunk_size=2), Reply(text="again")])
    assert isinstance(error, ModelStreamError)
    assert deltas == [TextDelta("He"), TextDelta("ll")]
    assert len(fake.requests) == 1


async def test_connection_dropped_before_any_delta_is_retried(autojump_clock: trio.abc.Clock) -> None:
    completion, deltas, fake = await _complete([Reply(text="lost", drop_after=1), Reply(text="again")])
    assert isinstance(completion, Completion)
    assert completion.text == "again"
    assert deltas == [TextDelta("agai"), TextDelta("n")]
    assert len(fake.requests) == 2


async def test_wrong_content_type_is_a_clear_error() -> None:
    error, _deltas, _fake = await _complete([Reply(content_type="text/html")])
    assert isinstance(error, ModelStreamError)
    assert "text/event-stream" in str(error)
    assert "text/html" in str(error)


async def test_unreachable_endpoint_is_retried_then_fails(autojump_clock: trio.abc.Clock) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIModel(_spec(f"http://127.0.0.1:{port}/v1", max_retries=2))
    start = trio.current_time()
    with trio.fail_after(60), pytest.raises(ModelError) as caught:
        await model.complete(MESSAGES, [])
    assert type(caught.value) is ModelError
    assert isinstance(caught.value.__cause__, httpx2.ConnectError)
    assert trio.current_time() - start > 0  # it backed off between attempts


class _Stop(Exception):
    pass


async def _stop(delta: Delta, midway: trio.CancelScope) -> None:
    raise _Stop


async def _hang(delta: Delta, midway: trio.CancelScope) -> None:
    midway.cancel()  # the consumer is cancelled while it holds a delta of the stream
    await trio.sleep_forever()


@pytest.mark.parametrize("on_delta", [_stop, _hang])
async def test_leaving_a_stream_midway_unwinds_the_http_stack(on_delta: Any) -> None:
    """A consumer that raises or is cancelled mid-stream leaves no half-open generator behind.

    Such a generator would be finalised by the garbage collector with a
    ResourceWarning, which this suite turns into an error.
    """
    with trio.fail_after(20):
        async with open_fake_openai([Reply(text="Hello there", chunk_size=2)]) as fake:
            model = OpenAIModel(_spec(fake.base_url))
            stopped = False
            with trio.CancelScope() as midway:
                try:
                    await model.complete(MESSAGES, [], on_delta=functools.partial(on_delta, midway=midway))
                except _Stop:
                    stopped = True
            # Left midway, the consumer's way: its exception, or its cancellation (not the stream's end).
            assert (stopped, midway.cancelled_caught) == ((True, False) if on_delta is _stop else (False, True))
            gc.collect()
            await trio.lowlevel.checkpoint()
    assert len(fake.requests) == 1


# --------------------------------------------------------------------------- other dialects (in memory)


def _canned_client(body: bytes, content_type: str = "text/event-stream") -> httpx2.AsyncClient:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": content_type}, content=body)

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


async def _complete_in_memory(body: bytes) -> tuple[Completion, list[Delta]]:
    deltas: list[Delta] = []

    async def on_delta(delta: Delta) -> None:
        deltas.append(delta)

    async with _canned_client(body) as client:
        model = OpenAIModel(_spec("http://model.invalid/v1"), http_client=client)
        return await model.complete(MESSAGES, [], on_delta=on_delta), deltas


async def test_multiline_data_comments_and_crlf() -> None:
    body = (
        b": keep-alive\r\n\r\n"
        b'data: {"choices": [{"delta":\r\ndata: {"content": "Hi"}}]}\r\n\r\n'
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\r\n\r\n'
        b"data: [DONE]"
    )
    completion, deltas = await _complete_in_memory(body)
    assert completion == Completion(text="Hi", finish_reason="stop")
    assert deltas == [TextDelta("Hi")]


async def test_calls_without_index_are_told_apart_by_id_and_reasoning_field_is_read() -> None:
    chunks = [
        {"choices": [{"delta": {"reasoning": "hmm"}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "x__y", "arguments": "{"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "}"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "x__z", "arguments": "{}"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    completion, _deltas = await _complete_in_memory(body)
    assert completion.tool_calls == (ToolCall("a", "x__y", "{}"), ToolCall("b", "x__z", "{}"))
    assert completion.reasoning == "hmm"


async def test_json_answer_to_a_streamed_request_is_accepted() -> None:
    answer = {"choices": [{"message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}]}
    deltas: list[Delta] = []

    async def on_delta(delta: Delta) -> None:
        deltas.append(delta)

    async with _canned_client(json.dumps(answer).encode(), "application/json; charset=utf-8") as client:
        model = OpenAIModel(_spec("http://model.invalid/v1"), http_client=client)
        completion = await model.complete(MESSAGES, [], on_delta=on_delta)
    assert completion == Completion(text="whole", finish_reason="stop")
    assert deltas == [TextDelta("whole")]


async def test_error_object_in_the_stream_is_an_error() -> None:
    body = b'data: {"error": {"message": "context length exceeded"}}\n\n'
    with pytest.raises(ModelStreamError, match="context length exceeded"):
        await _complete_in_memory(body)


async def test_finish_reason_without_done_is_a_complete_answer() -> None:
    body = b'data: {"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}\n\n'
    completion, _deltas = await _complete_in_memory(body)
    assert completion == Completion(text="ok", finish_reason="stop")


# --------------------------------------------------------------------------- SSE decoder


def test_sse_decoder_events() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b": comment\nevent: ping\ndata: a\ndata: b\n\ndata: c\r\n\r\ndata: tail")
    assert events == [ServerSentEvent("a\nb", "ping"), ServerSentEvent("c")]
    assert decoder.flush() == [ServerSentEvent("tail")]


@given(st.data())
def test_sse_decoder_is_independent_of_chunk_boundaries(data: st.DataObject) -> None:
    raw = 'data: 北京\r\n\r\n: note\ndata: {"a":\ndata: 1}\n\nevent: x\rdata: é\r\r'.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    decoder = SSEDecoder()
    events = []
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        events += decoder.feed(raw[start:end])
    events += decoder.flush()
    assert events == [ServerSentEvent("北京"), ServerSentEvent('{"a":\n1}'), ServerSentEvent("é", "x")]


# --------------------------------------------------------------------------- configuration


def test_default_model_is_the_demo_without_environment() -> None:
    spec = default_model_spec(environ={})
    assert spec.provider == "demo"
    assert isinstance(build_model(spec), DemoModel)


def test_default_model_uses_the_three_environment_variables() -> None:
    env = {"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_MODEL": "qwen3", "OPENAI_API_KEY": "sk-x"}
    spec = default_model_spec(environ=env)
    assert (spec.provider, spec.base_url, spec.model, spec.api_key_env) == (
        "openai",
        "http://localhost:11434/v1",
        "qwen3",
        "OPENAI_API_KEY",
    )
    model = build_model(spec)
    assert isinstance(model, OpenAIModel)
    assert model.name == "qwen3"


def test_build_model_by_provider() -> None:
    assert isinstance(build_model(ModelSpec(id="t", provider="test")), TestModel)
    assert isinstance(build_model(ModelSpec(id="d", provider="demo")), DemoModel)


def test_backoff_doubles_with_jitter_and_honours_retry_after() -> None:
    from yao_actors.models.openai import BACKOFF_INITIAL, BACKOFF_MAX, _backoff

    for attempt in range(8):
        step = min(BACKOFF_MAX, BACKOFF_INITIAL * 2**attempt)
        delays = {_backoff(attempt, None) for _ in range(50)}
        assert all(step / 2 <= delay <= step for delay in delays)
        assert len(delays) > 1, "no jitter"
    assert _backoff(0, 7.0) == 7.0
    assert _backoff(10, 1.0) >= BACKOFF_MAX / 2


# --------------------------------------------------------------------------- hostile endpoints (issue 9)


async def _serve_raw(listener: trio.SocketListener, body: bytes | None, content_type: str, status: int = 200) -> None:
    """Answer one request with ``body`` verbatim (``None``: read the request and never answer)."""
    stream = await listener.accept()
    async with stream:
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some()
        if body is None:
            await trio.sleep_forever()
        head = f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n"
        await stream.send_all(head.encode() + body)


async def _complete_raw(
    body: bytes | None, content_type: str = "text/event-stream", status: int = 200, **changes: Any
) -> Any:
    """One completion against a loopback endpoint answering with ``body``: the completion or the error."""
    with trio.fail_after(60):
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]
        async with listener, trio.open_nursery() as nursery:
            nursery.start_soon(_serve_raw, listener, body, content_type, status)
            model = OpenAIModel(_spec(f"http://127.0.0.1:{port}/v1", max_retries=0, **changes))
            try:
                result = await model.complete(MESSAGES, [])
            except ModelError as exc:
                result = exc
            nursery.cancel_scope.cancel()
    return result


def _sse(*data: str) -> bytes:
    return "".join(f"data: {item}\n\n" for item in data).encode()


_TEXT_CHUNK = json.dumps({"choices": [{"delta": {"content": "hi"}, "finish_reason": None}]})
_DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (_sse(_TEXT_CHUNK, _DEEP, "[DONE]"), "text/event-stream", "nested deeper than"),
        (_sse('{"choices": ' + _DEEP + "}"), "text/event-stream", "nested deeper than"),
        (_sse('{"usage": {"prompt_tokens": ' + "9" * 5000 + "}}"), "text/event-stream", "digits"),
        (_DEEP.encode(), "application/json", "nested deeper than"),
        (_sse('{"choices": "abc"}'), "text/event-stream", "choices must be an array"),
        (_sse('{"choices": [1]}'), "text/event-stream", "choices[0] must be an object"),
        (_sse('{"choices": [{"delta": []}]}'), "text/event-stream", "choices[0].delta must be an object"),
        (_sse('{"choices": [{"finish_reason": 3}]}'), "text/event-stream", "finish_reason must be a string"),
        (_sse('{"choices": [{"delta": {"tool_calls": {}}}]}'), "text/event-stream", "tool_calls must be an array"),
        (_sse('{"choices": [{"delta": {"tool_calls": [7]}}]}'), "text/event-stream", "tool_calls entry"),
        (_sse('{"choices": [{"delta": {"tool_calls": [{"index": []}]}}]}'), "text/event-stream", "index"),
        (
            _sse('{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": {}}}]}}]}'),
            "text/event-stream",
            "arguments must be a string",
        ),
        (_sse('{"usage": []}'), "text/event-stream", "usage must be an object"),
        (b'{"choices": [{"message": "x"}]}', "application/json", "choices[0].message"),
        (
            b'{"choices": [{"message": {"tool_calls": "abc"}}]}',
            "application/json",
            "tool_calls must be an array",
        ),
    ],
    ids=[
        "deep-chunk",
        "deep-field",
        "digits",
        "deep-whole-answer",
        "choices-string",
        "choice-number",
        "delta-array",
        "finish-number",
        "tool-calls-object",
        "tool-call-number",
        "index-array",
        "arguments-object",
        "usage-array",
        "message-string",
        "whole-tool-calls-string",
    ],
)
async def test_hostile_chunks_are_stream_errors(body: bytes, content_type: str, message: str) -> None:
    error = await _complete_raw(body, content_type, stream=content_type == "text/event-stream")
    assert isinstance(error, ModelStreamError)
    assert message in str(error)


async def test_bad_counts_in_usage_count_as_missing() -> None:
    chunk = {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}
    usage = {"prompt_tokens": "7", "completion_tokens": 1.5, "total_tokens": True}
    completion = await _complete_raw(_sse(json.dumps(chunk), json.dumps({"usage": usage}), "[DONE]"))
    assert completion == Completion(text="hi", finish_reason="stop", usage=Usage(0, 0, 0))


async def test_lone_surrogates_and_bad_utf8_from_the_endpoint_become_replacement_characters() -> None:
    text_chunk = json.dumps({"choices": [{"delta": {"content": "a\ud800"}}]})  # ASCII: the escape travels as is
    call = {"index": 0, "id": "c\udfff", "function": {"name": "t", "arguments": '{"x": "\ud800"}'}}
    call_chunk = json.dumps({"choices": [{"delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]})
    body = _sse(text_chunk).replace(b"a\\ud800", b"a\\ud800\xff") + _sse(call_chunk, "[DONE]")
    completion = await _complete_raw(body)
    assert isinstance(completion, Completion)
    assert completion.text == "a\ufffd\ufffd"  # the escape, then the byte 0xff
    assert completion.tool_calls == (ToolCall("c\ufffd", "t", '{"x": "\ufffd"}'),)
    json.dumps(completion.to_message(), ensure_ascii=False).encode("utf-8")


async def test_accepted_but_unanswered_request_says_the_endpoint_did_not_respond(
    autojump_clock: trio.abc.Clock,
) -> None:
    error = await _complete_raw(None, connect_timeout=7)
    assert isinstance(error, ModelTimeout)
    message = str(error)
    assert "/v1/chat/completions did not respond" in message
    assert "within 7 s (models.m.connect_timeout)" in message
    assert "connect deadline" not in message


async def test_a_lone_surrogate_in_the_history_is_sent_as_a_replacement_character() -> None:
    async with open_fake_openai([Reply(text="ok")]) as fake:
        model = OpenAIModel(_spec(fake.base_url), api_key="sk-test")
        messages = [
            {"role": "user", "content": "hi \ud800"},
            {"role": "tool", "tool_call_id": "c", "content": "\udc00"},
        ]
        with trio.fail_after(60):
            completion = await model.complete(messages, [])
    assert completion.text == "ok"
    (request,) = fake.requests
    assert request.body["messages"] == [
        {"role": "user", "content": "hi \ufffd"},
        {"role": "tool", "tool_call_id": "c", "content": "\ufffd"},
    ]


async def test_a_deeply_nested_error_body_is_quoted_not_parsed() -> None:
    error = await _complete_raw(b'{"error": ' + _DEEP.encode() + b"}", "application/json", status=400)
    assert isinstance(error, ModelHTTPError)
    assert error.status == 400
    assert error.message.startswith('{"error": [[[')


@pytest.mark.parametrize("stream", [True, False])
async def test_a_chunk_that_is_not_a_json_object_is_a_stream_error_naming_what_it_holds(stream: bool) -> None:
    model = OpenAIModel(_spec("http://127.0.0.1:9/v1", stream=stream))
    response = httpx2.Response(200, content=b"data: [1, 2]\n\n" if stream else b"[1, 2]")
    read = model._read_stream if stream else model._read_whole
    expected = r"^malformed JSON from the model endpoint \(expected a JSON object, got a list\): '\[1, 2\]'$"
    with pytest.raises(ModelStreamError, match=expected):
        await read(response, _Relay(None))
