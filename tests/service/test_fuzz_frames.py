"""Property tests: arbitrary JSON, text and bytes thrown at the frame parser and at a live connection (issue 9).

Invariants: the parser answers every input with a frame or a :class:`FrameError` and nothing else; a live
connection answers every frame (or closes cleanly), every run it started ends with exactly one terminal event, and
the service goes on serving new connections afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request

from tests.service.fake_runtime import FakeRuntime
from tests.service.support import TERMINAL, receive, running_service
from tests.service.test_hostile import still_serves
from yao_actors.cli.chat import open_service_connection
from yao_actors.errors import FrameError, RunErrorCode
from yao_actors.service.protocol import PingFrame, RunFrame, encode, parse_frame

#: Text with every kind of code point, lone surrogates included (Hypothesis leaves them out unless asked).
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
TEXT = st.text(alphabet=st.characters(exclude_categories=()) | SURROGATES, max_size=20)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
#: Arbitrary JSON values: wide (many keys and items) and nested.
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(TEXT, inner, max_size=6))
FIELDS = st.sampled_from(["type", "runId", "threadId", "assistant", "messages", "tools", "state", "role", "content"])
KINDS = st.sampled_from(["run", "cancel", "ping", "dance"])
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "system", "assistant", "tool"]) | JSON,
        "content": TEXT.map("fuzz ".__add__) | JSON,
    }
)
#: Frames shaped like the protocol's, with fields of the wrong type, unknown fields and hostile strings mixed in.
FRAME_LIKE = st.builds(
    lambda kind, messages, extra: {"type": kind, "messages": messages} | extra,
    KINDS,
    st.lists(MESSAGE, max_size=3) | JSON,
    st.dictionaries(FIELDS | TEXT, JSON | TEXT, max_size=4),
)
#: Nesting far deeper than the parser's recursion, and integers of more digits than Python converts.
HOSTILE_TEXT = st.one_of(
    st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 5000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(4000, 20000).map(lambda n: '{"type": "ping", "n": ' + "7" * n + "}"),
    st.text(max_size=200),
)


def _frame_texts() -> st.SearchStrategy[str]:
    """Frame texts as a client can send them: JSON (surrogates as escapes), hostile text, or plain text."""
    dumped = (JSON | FRAME_LIKE).map(lambda value: json.dumps(value, ensure_ascii=True))
    return dumped | HOSTILE_TEXT


def _check_parse(message: str | bytes) -> None:
    refusal: FrameError | None = None
    try:
        frame = parse_frame(message, max_bytes=4096)
    except FrameError as error:
        refusal = error
    if refusal is not None:
        assert refusal.code in (RunErrorCode.BAD_REQUEST, RunErrorCode.FRAME_TOO_LARGE)
        assert str(refusal)
        if refusal.run_id is not None:
            refusal.run_id.encode()  # the refusal names a run id the writer can send
    elif isinstance(frame, RunFrame):
        assert all(m["role"] == "user" for m in frame.messages)
        encode({"runId": frame.run_id, "threadId": frame.thread_id, "messages": list(frame.messages)}).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frame_texts() | TEXT | st.binary(max_size=64))
def test_the_parser_answers_any_input_with_a_frame_or_a_frame_error(message: str | bytes) -> None:
    _check_parse(message)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_encode_always_writes_valid_utf8_json(value: Any) -> None:
    text = encode({"type": "CUSTOM", "value": value})
    text.encode()  # the writer sends UTF-8; a lone surrogate must not reach it
    assert json.loads(text)["type"] == "CUSTOM"


async def _throw_at_a_live_connection(messages: list[str | bytes]) -> None:
    with trio.fail_after(30):
        async with running_service(FakeRuntime()) as service:
            async with open_service_connection(service.url) as ws:
                for message in messages:
                    await ws.send_message(message)
                await ws.send_message('{"type": "ping"}')
                frames = []
                while (frame := await receive(ws)) != {"type": "pong"}:
                    frames.append(frame)
                started = {f["runId"] for f in frames if f.get("type") == "RUN_STARTED"}
                while any(_terminals(frames, run_id) == 0 for run_id in started):
                    frames.append(await receive(ws))
            await still_serves(service)
    for run_id in started:
        assert _terminals(frames, run_id) == 1, run_id
    answered = [f for f in frames if f.get("type") in ("RUN_STARTED", "RUN_ERROR", "error", "pong")]
    assert len(answered) >= len(messages)  # every frame was answered: a run started, or a refusal


def _terminals(frames: list[dict[str, Any]], run_id: str) -> int:
    return sum(1 for f in frames if f.get("runId") == run_id and f.get("type") in TERMINAL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_frame_texts() | st.binary(max_size=32), min_size=1, max_size=6))
def test_a_live_connection_answers_arbitrary_frames_and_the_service_goes_on(messages: list[str | bytes]) -> None:
    trio.run(_throw_at_a_live_connection, messages)


async def _garbage_after_the_handshake(garbage: bytes) -> None:
    with trio.fail_after(30):
        async with running_service(FakeRuntime()) as service:
            client = WSConnection(ConnectionType.CLIENT)
            stream = await trio.open_tcp_stream("127.0.0.1", service.port)
            async with stream:
                await stream.send_all(client.send(Request(host="127.0.0.1", target="/")))
                client.receive_data(await stream.receive_some())
                assert any(isinstance(event, AcceptConnection) for event in client.events())
                await stream.send_all(garbage)
                await stream.send_eof()
                while await stream.receive_some():  # the service answers, then closes: never hangs or dies
                    pass
            await still_serves(service)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=256))
def test_raw_bytes_on_an_open_websocket_close_it_cleanly_and_the_service_goes_on(garbage: bytes) -> None:
    trio.run(_garbage_after_the_handshake, garbage)


@pytest.mark.parametrize(
    ("message", "valid"),
    [
        ('{"type":"ping"}', True),
        ('{ "type" : "ping" }', True),
        ('{"type":"ping","x":1}', False),
        ('{"type":"ping","type":"run"}', False),
        ('["ping"]', False),
        ('{"type":"Ping"}', False),
    ],
)
def test_the_ping_fast_path_takes_exactly_the_valid_ping(message: str, valid: bool) -> None:
    """A ping skips the schema; only the one frame that would pass it may (the schema decides the rest)."""
    if valid:
        assert parse_frame(message, max_bytes=4096) == PingFrame()
    else:
        with pytest.raises(FrameError) as refused:
            parse_frame(message, max_bytes=4096)
        assert refused.value.code == RunErrorCode.BAD_REQUEST


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("plain", '{"v":"plain"}'),
        ("北京", '{"v":"北京"}'),
        ("\ud800", '{"v":"\\ud800"}'),
        ("北京\ud800", '{"v":"\\u5317\\u4eac\\ud800"}'),
    ],
)
def test_encode_keeps_text_as_is_and_escapes_only_what_is_not_utf8(value: str, written: str) -> None:
    """The ASCII fast path and the check for other text give the same frames as before."""
    assert encode({"v": value}) == written
