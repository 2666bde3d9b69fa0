"""Property tests: arbitrary model output and arbitrary MCP results never break the runtime (issue 9).

The parsers under test read what a model endpoint or an MCP server sends.
Whatever they get, they answer with a value or a documented error
(``ModelStreamError`` for a stream; an ``invalid arguments`` result; text for
an unusable tool result), and everything they answer with serialises to UTF-8
JSON, so it can go into the history, to the next model call and into events.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import mcp.types
import pydantic
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yao_actors.config import ModelSpec
from yao_actors.errors import ModelStreamError
from yao_actors.models import Completion, OpenAIModel
from yao_actors.models.openai import _Relay
from yao_actors.tools.arguments import check_arguments, parse_arguments
from yao_actors.tools.results import ToolCallResult, parse_content, tool_message_content

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Any text, lone surrogates included (``st.text()`` leaves them out).
_text = st.text(st.characters(exclude_categories=[]))
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | _text
_json = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=20
)


#: A number with more digits than ``int()`` converts (kept as text: Hypothesis cannot print such ints).
_huge_number = st.integers(min_value=4301, max_value=6000).map(lambda n: '{"a": ' + "9" * n + "}")


@st.composite
def _deep(draw: st.DrawFn) -> str:
    """Text nested ``depth`` levels deep, closed or not."""
    depth = draw(st.integers(min_value=100, max_value=3000))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    inner = draw(st.sampled_from(["1", '"x"', ""]))
    return opener * depth + inner + (closer * depth if draw(st.booleans()) else "")


_fields = st.fixed_dictionaries(
    {},
    optional={
        "index": _json,
        "id": _json,
        "type": _json,
        "function": st.fixed_dictionaries({}, optional={"name": _json, "arguments": _text | _json}) | _json,
    },
)
_delta = st.fixed_dictionaries(
    {},
    optional={
        "content": _text | _json,
        "reasoning_content": _text | _json,
        "tool_calls": st.lists(_fields | _json, max_size=3) | _json,
    },
)
_chunk = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(st.fixed_dictionaries({}, optional={"delta": _delta, "finish_reason": _json}) | _json)
        | _json,
        "usage": st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]), _json)
        | _json,
        "error": st.none() | _json,
    },
)
_data_line = (
    _chunk.map(lambda c: json.dumps(c))
    | _json.map(lambda v: json.dumps(v))
    | _deep()
    | _huge_number
    | _text
    | st.just("[DONE]")
)


def _sse_body(lines: list[str], garbage: bytes) -> bytes:
    return (
        "".join(f"data: {line.replace(chr(10), ' ').replace(chr(13), ' ')}\n\n" for line in lines).encode(
            "utf-8", "surrogatepass"
        )
        + garbage
    )


def _assert_encodable(value: Any) -> None:
    json.dumps(value, ensure_ascii=False).encode("utf-8")


async def _read(body: bytes, stream: bool) -> Completion | ModelStreamError:
    spec = ModelSpec(id="m", provider="openai", base_url="http://127.0.0.1:9/v1", api_key_env=None, stream=stream)
    model = OpenAIModel(spec)
    response = httpx2.Response(200, content=body)
    try:
        if stream:
            return await model._read_stream(response, _Relay(None))
        return await model._read_whole(response, _Relay(None))
    except ModelStreamError as error:
        return error


@SETTINGS
@given(st.lists(_data_line, max_size=6), st.binary(max_size=20), st.booleans())
def test_any_stream_gives_a_completion_or_a_stream_error(lines: list[str], garbage: bytes, stream: bool) -> None:
    body = _sse_body(lines, garbage) if stream else "\n".join(lines).encode("utf-8", "surrogatepass") + garbage
    outcome = trio.run(_read, body, stream)
    if isinstance(outcome, Completion):
        _assert_encodable(outcome.to_message())
        _assert_encodable([outcome.text, outcome.reasoning, outcome.finish_reason])
    else:
        str(outcome).encode("utf-8")


_schema = st.just({"type": "object", "properties": {"a": {"type": "string"}}}) | st.none() | st.just({})


@SETTINGS
@given(st.one_of(_text, _deep(), _huge_number, _json.map(lambda v: json.dumps(v)), _chunk.map(json.dumps)), _schema)
def test_any_argument_text_gives_a_result(raw: str, schema: Any) -> None:
    checked = check_arguments(raw, schema)
    assert (checked.value is None) == bool(checked.problems)
    _assert_encodable(checked.value)
    _assert_encodable(checked.error)
    parse_arguments(raw)


_text_block = st.fixed_dictionaries(
    {"type": st.just("text"), "text": _text | _deep() | _huge_number | _json.map(lambda v: json.dumps(v)) | _json}
)
_image_block = st.fixed_dictionaries(
    {"type": st.just("image")}, optional={"data": _text | _json, "mimeType": _text | _json}
)
_other_block = st.dictionaries(_text, _json, max_size=4) | st.fixed_dictionaries(
    {"type": st.sampled_from(["resource", "audio", "resource_link", "x"])},
    optional={"resource": _json, "uri": _json},
)
_block = _text_block | _image_block | _other_block


def _as_mcp(block: dict[str, Any]) -> Any:
    """The block as the MCP SDK would deliver it, if the SDK accepts it; else the dict."""
    try:
        return pydantic.TypeAdapter(mcp.types.ContentBlock).validate_python(block)
    except pydantic.ValidationError:
        return block


@SETTINGS
@given(st.lists(_block, max_size=5), st.booleans())
def test_any_mcp_result_parses_to_an_encodable_value(blocks: list[dict[str, Any]], as_models: bool) -> None:
    content = [_as_mcp(b) for b in blocks] if as_models else blocks
    parsed = parse_content(content)
    _assert_encodable(parsed)
    result = ToolCallResult("c", "s__t", "s", "t", "{}", result=parsed)
    tool_message_content(result).encode("utf-8")
