"""The compiled frame checks never accept what jsonschema refuses, and do accept the common well-formed frames."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yao_actors.errors import FrameError
from yao_actors.service import protocol
from yao_actors.service.frame_safety import MAX_DEPTH, hostile_value, plainly_safe
from yao_actors.service.protocol import FRAME_SCHEMAS, parse_frame
from yao_actors.tools.schema_check import compile_check

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
TEXT = st.text(alphabet=st.characters(exclude_categories=()) | SURROGATES, max_size=8)
SCALARS = st.none() | st.booleans() | st.integers(-3, 2000) | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3))
#: Values near the schemas' edges: empty, 200 and 201 characters, tool names with and without a newline.
EDGY_TEXT = st.sampled_from(["", "a", "x" * 200, "x" * 201, "get_weather", "bad name", "ok\n", "北京"]) | TEXT
ROLES = st.sampled_from(["user", "system", "developer", "assistant", "tool", "robot"])
MESSAGE = st.dictionaries(
    st.sampled_from(["id", "role", "content", "name", "toolCallId", "extra"]),
    ROLES | EDGY_TEXT | JSON,
    max_size=6,
)
TOOL = st.dictionaries(
    st.sampled_from(["name", "description", "parameters", "metadata", "extra"]),
    EDGY_TEXT | st.just({"type": "object"}) | JSON,
    max_size=5,
)
RESUME = st.dictionaries(
    st.sampled_from(["interruptId", "status", "payload", "metadata", "extra"]),
    st.sampled_from(["resolved", "cancelled", "maybe"]) | EDGY_TEXT | JSON,
    max_size=5,
)
FIELD_VALUES = {
    "messages": st.lists(MESSAGE, max_size=3) | JSON,
    "tools": st.lists(TOOL, max_size=2) | JSON,
    "resume": st.lists(RESUME, max_size=2) | JSON,
    "afterSeq": st.integers(-2, 5) | st.floats(-1, 3) | st.booleans() | JSON,
    "limit": st.sampled_from([0, 1, 1000, 1001, 5.0, True]) | JSON,
}
FIELDS = [
    "runId", "threadId", "assistant", "parentRunId", "protocolVersion", "messages", "tools", "context", "state",
    "forwardedProps", "resume", "afterSeq", "limit", "other",
]  # fmt: skip


@st.composite
def frames(draw: st.DrawFn) -> dict[str, Any]:
    """Frames of every type, mostly close to valid, with wrong types, unknown fields and edge values mixed in."""
    frame: dict[str, Any] = {"type": draw(st.sampled_from(sorted(FRAME_SCHEMAS)))}
    for field in draw(st.lists(st.sampled_from(FIELDS), max_size=5, unique=True)):
        frame[field] = draw(FIELD_VALUES.get(field, EDGY_TEXT | JSON))
    return frame


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_whatever_a_check_accepts_jsonschema_accepts(frame: dict[str, Any]) -> None:
    kind = frame["type"]
    if protocol._CHECKS[kind](frame):
        assert protocol._VALIDATORS[kind].is_valid(frame), frame


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "run", "runId": "r1", "messages": [{"role": "user", "content": "北京今天适合穿什么?"}]},
        {"type": "run", "messages": [{"role": "tool", "toolCallId": "c1", "content": "{}"}], "threadId": "t"},
        {
            "type": "run",
            "assistant": "weather",
            "messages": [{"id": "m1", "role": "user", "content": "hi", "name": "ann"}],
            "tools": [{"name": "pick_color", "description": "d", "parameters": {"type": "object"}}],
            "context": [],
            "state": {"a": [1, 2]},
            "forwardedProps": None,
        },
        {"type": "run", "messages": [], "resume": [{"interruptId": "i1", "status": "resolved", "payload": 1}]},
        {"type": "cancel", "runId": "r1"},
        {"type": "resume", "runId": "r1", "afterSeq": 3},
        {"type": "history", "threadId": "t1"},
        {"type": "forget", "threadId": "t1"},
        {"type": "threads", "limit": 10},
    ],
)
def test_the_common_well_formed_frames_pass_the_check_without_the_validator(frame: dict[str, Any]) -> None:
    assert protocol._VALIDATORS[frame["type"]].is_valid(frame)
    assert protocol._CHECKS[frame["type"]](frame)


def test_a_check_is_stricter_where_it_is_simple_and_the_validator_decides() -> None:
    limit = compile_check({"type": "integer", "minimum": 1})
    assert limit(2)
    assert not limit(2.0)  # jsonschema says yes: the parser asks it
    assert not limit(True)
    assert not limit(0)
    assert not compile_check({"type": "string", "format": "email"})("a@b")  # a keyword not compiled: never
    assert compile_check({})(object())
    assert parse_frame('{"type": "threads", "limit": 2.0}', max_bytes=1000) == protocol.ThreadsFrame(limit=2.0)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"type": "run", "messages": [{"role": "user"}]}, "messages[0]: 'content' is a required property"),
        ({"type": "run", "messages": [{"role": "tool", "content": "x"}]}, "'toolCallId' is a required property"),
        ({"type": "run", "messages": [], "runId": "r"}, "messages: [] should be non-empty"),
        ({"type": "run", "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "a b"}]}, "tools[0]"),
        ({"type": "cancel", "runId": ""}, "runId: '' should be non-empty"),
    ],
)
def test_a_bad_frame_still_gets_the_validators_message_naming_the_field(frame: dict[str, Any], message: str) -> None:
    with pytest.raises(FrameError) as refused:
        parse_frame(json.dumps(frame), max_bytes=10_000)
    assert message in str(refused.value)


@settings(max_examples=200, deadline=None)
@given(JSON | st.builds(lambda n: "[" * n + "]" * n, st.integers(MAX_DEPTH - 2, MAX_DEPTH + 2)))
def test_text_the_parser_skips_the_walk_for_has_nothing_the_walk_would_refuse(value: Any) -> None:
    text = value if isinstance(value, str) and value.startswith("[") else json.dumps(value, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps(value)  # the client's escapes
    if plainly_safe(text):
        assert hostile_value(json.loads(text)) is None
