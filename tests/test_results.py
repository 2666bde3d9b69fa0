"""The seed's ParsedContent rules and the tool message content."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from yao_actors.errors import ErrorKind
from yao_actors.tools.results import (
    ToolCallResult,
    ToolOutcome,
    call_outcome,
    compact_json,
    parse_content,
    tool_message_content,
)
from yao_actors.tools.tool_call import ToolCall


@pytest.mark.parametrize(
    ("blocks", "expected"),
    [
        ([{"type": "text", "text": '{"a":1}'}], {"a": 1}),
        ([{"type": "text", "text": "plain"}], "plain"),
        ([{"type": "text", "text": "123"}], 123),
        ([{"type": "text", "text": "null"}], None),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "[1]"}], ["a", [1]]),
        (
            [{"type": "image", "data": "QUJD", "mimeType": "image/png"}],
            {"type": "image", "data": "QUJD", "mimeType": "image/png"},
        ),
        ([{"type": "text"}], None),
        ([], None),
        ([{"type": "resource", "resource": {"uri": "file:///x", "text": "t"}}], {"uri": "file:///x", "text": "t"}),
        (
            [{"type": "audio", "data": "x", "mimeType": "audio/wav"}],
            {"type": "audio", "data": "x", "mimeType": "audio/wav"},
        ),
    ],
)
def test_parse_content_follows_the_seed(blocks: list[dict[str, Any]], expected: Any) -> None:
    assert parse_content(blocks) == expected


def test_parse_content_accepts_mcp_models() -> None:
    blocks = [
        TextContent(type="text", text='{"temp": 3}'),
        ImageContent(type="image", data="QQ==", mimeType="image/png"),
    ]
    assert parse_content(blocks) == [{"temp": 3}, {"type": "image", "data": "QQ==", "mimeType": "image/png"}]


def test_compact_json_keeps_order_and_text() -> None:
    assert compact_json({"z": 1, "a": "北京 <b>&"}) == '{"z":1,"a":"北京 <b>&"}'


def _result(**fields: Any) -> ToolCallResult:
    return ToolCallResult(call_id="c1", name="w__get", server="w", tool="get", arguments="{}", **fields)


def test_tool_message_content() -> None:
    assert tool_message_content(_result(result={"temp": 3, "city": "北京"})) == '{"temp":3,"city":"北京"}'
    assert tool_message_content(_result(result=None)) == "null"
    failed = _result(result="bad input", error="bad input", kind=ErrorKind.TOOL_ERROR)
    assert tool_message_content(failed) == "Error: bad input"


@pytest.mark.parametrize(
    ("kind", "text", "retryable"),
    [
        (ErrorKind.UNKNOWN_TOOL, "", True),
        (ErrorKind.INVALID_ARGUMENTS, "", True),
        (ErrorKind.TOOL_ERROR, "bad input", True),
        (ErrorKind.TOOL_ERROR, "upstream Timeout", False),
        (ErrorKind.TOOL_ERROR, "Service Unavailable", False),
        (ErrorKind.TIMEOUT, "", False),
        (ErrorKind.SERVER_UNAVAILABLE, "", False),
        (ErrorKind.CANCELLED, "", False),
        (None, "", False),
    ],
)
def test_retryability_by_kind(kind: ErrorKind | None, text: str, retryable: bool) -> None:
    assert ToolOutcome(error=text or None, kind=kind).retryable is retryable


@pytest.mark.parametrize(
    "text",
    ["[" * 1000 + "]" * 1000, '{"a":' * 3000 + "1" + "}" * 3000, "[" * 100_000, "1" * 5000],
    ids=["arrays", "objects", "unterminated", "digits"],
)
def test_text_that_is_not_usable_json_stays_text(text: str) -> None:
    assert parse_content([{"type": "text", "text": text}]) == text
    assert parse_content([TextContent(type="text", text=text)]) == text


def test_results_never_hold_lone_surrogates() -> None:
    blocks = [
        TextContent(type="text", text='{"k\\ud800": "v\\udfff"}'),
        {"type": "text", "text": "plain \ud800"},
        {"type": "image", "data": "\udc00", "mimeType": "image/png"},
        {"type": "custom", "x": ["\ud800"]},
    ]
    parsed = parse_content(blocks)
    assert parsed == [
        {"k\ufffd": "v\ufffd"},
        "plain \ufffd",
        {"type": "image", "data": "\ufffd", "mimeType": "image/png"},
        {"type": "custom", "x": ["\ufffd"]},
    ]
    result = ToolCallResult("c1", "s__t", "s", "t", "{}", result=parsed)
    assert tool_message_content(result).encode("utf-8")


def test_an_error_text_with_lone_surrogates_is_encodable() -> None:
    # An in-process server's error text never went through a JSON parser.
    result = ToolCallResult("c1", "s__t", "s", "t", "{}", error="bad \ud800", kind=ErrorKind.TOOL_ERROR)
    assert tool_message_content(result) == "Error: bad \ufffd"


SCHEMA = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}


def call_result(structured: Any, *blocks: Any) -> CallToolResult:
    content = list(blocks) or [TextContent(type="text", text=json.dumps(structured))]
    return CallToolResult(content=content, structured_content=structured)


def test_structured_output_is_given_once_and_checked_against_the_output_schema() -> None:
    ok = call_outcome(call_result({"temp": 3}), SCHEMA, 0.5)
    assert (ok.result, ok.structured, ok.kind) == ({"temp": 3}, True, None)
    bad = call_outcome(call_result({"temp": "warm"}), SCHEMA, 0.5)
    assert bad.kind is ErrorKind.TOOL_ERROR
    assert bad.error == (
        "the tool's structuredContent does not match its outputSchema: temp: 'warm' is not of type 'number'"
    )
    missing = call_outcome(CallToolResult(content=[TextContent(type="text", text="{}")]), SCHEMA, 0.5)
    assert missing.error == "the tool declares an outputSchema but returned no structuredContent"
    plain = call_outcome(call_result({"temp": "warm"}), None, 0.5)  # no outputSchema: today's rules
    assert (plain.result, plain.structured) == ({"temp": "warm"}, False)


def test_structured_output_keeps_images_and_unwraps_an_sdk_wrapped_value() -> None:
    image = ImageContent(type="image", data="QQ==", mime_type="image/png")
    with_image = call_outcome(call_result({"temp": 3}, TextContent(type="text", text="3"), image), SCHEMA, 0)
    assert with_image.result == [{"temp": 3}, {"type": "image", "data": "QQ==", "mimeType": "image/png"}]
    wrapped = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}
    assert call_outcome(call_result({"result": "hi"}), wrapped, 0).result == "hi"


@pytest.mark.parametrize(
    ("outcome", "retryable"),
    [
        (ToolOutcome(result="25度"), False),
        (ToolOutcome(error="no such city: Atlantis", kind=ErrorKind.TOOL_ERROR), True),
        (ToolOutcome(error="database connection refused", kind=ErrorKind.TOOL_ERROR), False),
        (ToolOutcome(error="took too long", kind=ErrorKind.TIMEOUT), False),
    ],
)
def test_a_result_made_from_an_outcome_says_whether_a_retry_may_help_as_the_outcome_does(
    outcome: ToolOutcome, retryable: bool
) -> None:
    # Every result made from an outcome is made here: a call dispatch ran, and a task a restarted process took up.
    result = ToolCallResult.of(ToolCall("c1", "weather__get", '{"city":"北京"}'), "weather", "get", outcome)
    assert result.retryable is retryable
    assert (result.call_id, result.server, result.tool, result.error) == ("c1", "weather", "get", outcome.error)
